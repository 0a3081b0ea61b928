"""The workbench's on-disk cache: where it lives, and how an entry in it is built exactly once.

Everything cached lives under `cache_root()` (`$CODESIGN_CACHE`, or `~/.cache/codesign`), one
folder per kind: `verilog/`, `area/`, `rtl/`, `pyverilator/`, `timing/`, `kernels/`, `fsim/`,
`tune/`.

Built entries (the Verilator and C++ builds) are directories, `CacheEntry`: complete once their
marker file exists.  A builder fills a temporary directory beside the entry while holding the
entry's lock file, and one atomic rename publishes it, so a reader that sees the marker sees the
whole build, and concurrent builders of one key (pytest-xdist workers, parallel sweeps) build it
once.  Single files (the Verilog, area reports) are written with `write_atomic` instead.

Nothing in the cache is trusted because it exists.  A built entry holds a manifest (its key,
and the size and SHA-256 of its marker file) written inside the temporary directory, so it is
renamed into place with the build; a single file written by `write_checked` has a sidecar with
its key and SHA-256.  An entry or file that is truncated, empty, or another key's (copied or
renamed into place) fails the check and is rebuilt; a check that passed is remembered per
process by the file's inode, size and modification time.  A cache directory that cannot be
written is a `CacheError` naming it, never a traceback.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hw.errors import WorkbenchError

CACHE_ENV = "CODESIGN_CACHE"
MANIFEST = ".manifest.json"
_VERIFIED: dict[Path, tuple[int, int, int]] = {}  # marker -> (inode, size, mtime) checked here


class IncompleteBuildError(ValueError):
    """A cache entry's build returned without writing the entry's marker file."""


class CacheError(WorkbenchError):
    """The cache directory cannot be written (permissions, a full disk, a file in the way)."""


def _unwritable(path: Path, exc: OSError) -> CacheError:
    return CacheError(f"cache directory {path} cannot be written ({exc.strerror or exc}); set "
                      f"{CACHE_ENV} to a writable directory")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def cache_root() -> Path:
    """The workbench's cache directory: `$CODESIGN_CACHE` or `~/.cache/codesign`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "codesign"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (created, with its folders, if missing).

    The lock file is left in place afterwards: deleting it could let a third process lock a new
    file while a second still waits on the old one.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "w")  # noqa: SIM115 -- closed by the with below
    except OSError as exc:
        raise _unwritable(path.parent, exc) from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class CacheEntry:
    """The cached build in `directory`, complete once the file `directory / marker` exists.

    Layout beside the entry, in `directory.parent`: the lock file `.<name>.lock` (kept) and,
    while a build runs, its temporary directory `.build-<name>-XXXXXXXX` (removed afterwards).
    """

    directory: Path
    marker: str

    @property
    def path(self) -> Path:
        """The marker file: what callers load (the built library, typically)."""
        return self.directory / self.marker

    @property
    def lock_path(self) -> Path:
        return self.directory.with_name(f".{self.directory.name}.lock")

    def is_complete(self) -> bool:
        """The marker exists and matches the manifest: this entry's key, size and checksum."""
        signature = _signature(self.path)
        if signature is None:
            return False
        if _VERIFIED.get(self.path) == signature:
            return True
        try:
            manifest = json.loads((self.directory / MANIFEST).read_text())
        except (OSError, ValueError):
            return False
        valid = isinstance(manifest, dict) and manifest.get("key") == self.directory.name and \
            manifest.get("marker") == self.marker and manifest.get("size") == signature[1] and \
            manifest.get("sha256") == sha256_of(self.path)
        if valid:
            _VERIFIED[self.path] = signature
        return valid

    def get_or_build(self, build: Callable[[Path], None]) -> Path:
        """`self.path`, after calling `build(tmp)` to fill the entry if it is not complete.

        Contract:
        * a complete entry is returned as it is, without taking the lock (it never changes);
        * otherwise the lock is taken and completeness checked again, so of several processes
          racing on one key the first builds and the others reuse its entry;
        * `build` gets an empty temporary directory beside the entry and must write the marker
          into it; the directory is then renamed into place in one step.  An incomplete entry
          left by something else (the marker deleted by hand) is removed and replaced;
        * if `build` raises, its exception propagates unchanged and neither the temporary
          directory nor an entry is left; if it returns without the marker,
          `IncompleteBuildError` is raised, likewise leaving nothing.
        """
        if self.is_complete():
            return self.path
        with locked(self.lock_path):
            if not self.is_complete():  # another process may have built it while we waited
                self._build(build)
        return self.path

    def _build(self, build: Callable[[Path], None]) -> None:
        try:
            tmp = Path(tempfile.mkdtemp(dir=self.directory.parent, prefix=f".build-{self.directory.name}-"))
        except OSError as exc:
            raise _unwritable(self.directory.parent, exc) from None
        try:
            build(tmp)
            if not (tmp / self.marker).exists():
                raise IncompleteBuildError(
                    f"the build of cache entry {self.directory} finished without writing its "
                    f"marker file {self.marker}"
                )
            marker = tmp / self.marker
            manifest = {"key": self.directory.name, "marker": self.marker,
                        "size": marker.stat().st_size, "sha256": sha256_of(marker)}
            (tmp / MANIFEST).write_text(json.dumps(manifest) + "\n")
            if self.directory.exists():  # incomplete or damaged: a rename onto it would fail
                shutil.rmtree(self.directory)
            os.rename(tmp, self.directory)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that concurrent readers see all of it or nothing.

    No lock: concurrent writers of one path write the same text, and the last rename wins.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise _unwritable(path.parent, exc) from None
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _sidecar(path: Path) -> Path:
    return path.with_name(f".{path.name}.sha256")


def write_checked(path: Path, text: str) -> None:
    """`write_atomic`, plus a sidecar with the file's key (its folder and name) and SHA-256, so
    `read_checked` can tell it from a damaged or foreign file."""
    write_atomic(path, text)
    digest = hashlib.sha256(text.encode()).hexdigest()
    write_atomic(_sidecar(path), f"{digest} {path.parent.name}/{path.name}\n")


def read_checked(path: Path) -> str | None:
    """The text `write_checked` wrote at `path`, or None when it is missing, damaged, or another
    key's file (the caller then rebuilds it)."""
    try:
        text = path.read_text()
        expected = _sidecar(path).read_text().split()
    except (OSError, UnicodeDecodeError):
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()
    return text if expected == [digest, f"{path.parent.name}/{path.name}"] else None


class SealedFolder:
    """A folder of one file per key (`<key><suffix>`), each sealed: the data, then `seal` and the
    SHA-256 of key + data.  A reader gets the data back only from an intact file written for its
    key; a truncated, empty or foreign file reads as missing and is deleted, so the caller
    rebuilds the entry instead of trusting it.  Writes go through a temporary file and a rename.

    Where the folder is: `use(path)` (None: no folder), else the environment variable `env`
    ("", "0", "off", "none" turn it off), else none; `use_default()` is the command line's choice,
    `cache_root() / name`, unless the variable or `use` said otherwise.  A folder that cannot be
    read or written only costs the rebuilds (kernels' objects, fsim's recorded runs)."""

    _OFF = ("", "0", "off", "none")

    def __init__(self, name: str, env: str, seal: bytes, suffix: str) -> None:
        self.name, self.env, self.seal, self.suffix = name, env, seal, suffix
        self._chosen: Path | None = None

    def use(self, path: str | Path | None) -> None:
        """Keep the files under `path` (created if missing); None: the environment decides."""
        if path is not None:
            Path(path).mkdir(parents=True, exist_ok=True)
        self._chosen = None if path is None else Path(path)

    def default_dir(self) -> Path:
        return cache_root() / self.name

    def directory(self) -> Path | None:
        """The folder in use now, or None."""
        if self._chosen is not None:
            return self._chosen
        env = os.environ.get(self.env)
        return None if env is None or env.strip().lower() in self._OFF else Path(env)

    def use_default(self) -> None:
        """`default_dir()` unless the environment variable is set or `use` chose a folder; a
        home that cannot hold it leaves the folder off."""
        if self._chosen is not None or self.env in os.environ:
            return
        with contextlib.suppress(OSError):
            self.use(self.default_dir())

    def _sealed(self, key: str, data: bytes) -> bytes:
        return self.seal + hashlib.sha256(key.encode() + data).digest()

    def has(self, key: str) -> bool:
        """Whether a file for `key` is there (`read` may still find it damaged)."""
        folder = self.directory()
        return folder is not None and (folder / f"{key}{self.suffix}").is_file()

    def read(self, key: str) -> bytes | None:
        """The data written for `key`, or None (no folder, missing, or damaged: deleted)."""
        folder = self.directory()
        if folder is None:
            return None
        path = folder / f"{key}{self.suffix}"
        try:
            data = path.read_bytes()
        except OSError:
            return None
        size = len(data) - len(self.seal) - 32
        if size > 0 and data[size:] == self._sealed(key, data[:size]):
            return data[:size]
        with contextlib.suppress(OSError):
            path.unlink()
        return None

    def write(self, key: str, data: bytes) -> None:
        """Keep `data` for `key`, if a folder is in use and can be written."""
        folder = self.directory()
        if folder is None:
            return
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)  # the variable may name a new directory
            tmp.write_bytes(data + self._sealed(key, data))
            tmp.replace(folder / f"{key}{self.suffix}")
        except OSError:  # a read-only or full folder only costs the rebuild
            with contextlib.suppress(OSError):
                tmp.unlink()
