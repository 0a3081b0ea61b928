"""The workbench's on-disk cache: where it lives, and how an entry in it is built exactly once.

Everything cached lives under `cache_root()` (`$CODESIGN_CACHE`, or `~/.cache/codesign`), one
folder per kind: `verilog/`, `area/`, `rtl/`, `pyverilator/`, `timing/`, `kernels/`, `tune/`.

Built entries (the Verilator and C++ builds) are directories, `CacheEntry`: complete once their
marker file exists.  A builder fills a temporary directory beside the entry while holding the
entry's lock file, and one atomic rename publishes it, so a reader that sees the marker sees the
whole build, and concurrent builders of one key (pytest-xdist workers, parallel sweeps) build it
once.  Single files (the Verilog, area reports) are written with `write_atomic` instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "CODESIGN_CACHE"


class IncompleteBuildError(ValueError):
    """A cache entry's build returned without writing the entry's marker file."""


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
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
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
        return self.path.exists()

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
        tmp = Path(tempfile.mkdtemp(dir=self.directory.parent, prefix=f".build-{self.directory.name}-"))
        try:
            build(tmp)
            if not (tmp / self.marker).exists():
                raise IncompleteBuildError(
                    f"the build of cache entry {self.directory} finished without writing its "
                    f"marker file {self.marker}"
                )
            if self.directory.exists():  # incomplete: renaming onto a non-empty directory fails
                shutil.rmtree(self.directory)
            os.rename(tmp, self.directory)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that concurrent readers see all of it or nothing.

    No lock: concurrent writers of one path write the same text, and the last rename wins.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
