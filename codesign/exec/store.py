"""The on-disk cache of tuning work: measured points and lowered points' features.

One SQLite file in WAL mode (readers never block the writer) under `$CODESIGN_CACHE/tune/`.  Every key
starts with a digest of the sources that decide a Program and its cycles (the operator compiler,
hw/, and the simulator of the backend), so editing them makes earlier entries unreachable and
re-running an unchanged tree costs lookups only.  Keys also carry the workload, every config
parameter (the DRAM model too) and the knobs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from codesign.tune.records import Measurement
from hw.cache import CACHE_ENV, CacheError, cache_root, locked

_ROOT = Path(__file__).resolve().parents[2]
# What a Program depends on (compiler side) and what its measurement depends on (per backend).
_COMPILER = ("compiler/build.py", "compiler/errors.py", "compiler/codegen/accel/*.py", "compiler/lower/*.py",
             "compiler/passes/*.py", "compiler/schedule/*.py", "compiler/target/*.py", "compiler/te/*.py",
             "compiler/tir/*.py", "compiler/ops/*.py", "compiler/ops/accel/*.py", "hw/*.py")
_FEATURES = ("compiler/tune/*.py",)  # features also depend on their own code
_BACKEND = {"timing": ("sim/timing/*",), "fsim": ("sim/*.py",),
            "rtl": ("hw/rtl/**/*.py", "sim/rtl/*")}


@functools.cache
def source_digest(backend: str | None = None, features: bool = False) -> str:
    """16 hex digits over the sources that decide a Program (and the measurement on `backend`,
    or the features)."""
    patterns = _COMPILER + (_BACKEND.get(backend, ()) if backend else ()) + (_FEATURES if features else ())
    digest = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(_ROOT.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(_ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _open(path: Path) -> sqlite3.Connection:
    """The store at `path`, created if missing; sqlite3.DatabaseError when the file is not one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=60)
    except (OSError, sqlite3.OperationalError) as exc:
        raise CacheError(f"tuning cache {path} cannot be opened ({exc}); set {CACHE_ENV} to a "
                         "writable directory") from None
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        for table in ("measurements", "features"):
            db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value TEXT)")
        db.commit()
    except sqlite3.OperationalError as exc:
        db.close()
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise sqlite3.DatabaseError(str(exc)) from None
        raise CacheError(f"tuning cache {path} cannot be opened ({exc}); set {CACHE_ENV} to a "
                         "writable directory") from None
    except sqlite3.DatabaseError:
        db.close()
        raise
    except UnicodeDecodeError as exc:  # a schema of bytes that are not UTF-8: not a store of ours
        db.close()
        raise sqlite3.DatabaseError(str(exc)) from None
    return db


class Store:
    """Key -> JSON value, for measurements and features; safe to share between processes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_root() / "tune" / "cache.sqlite"
        try:
            self.db = _open(self.path)
            self._inode = _inode(self.path)
        except sqlite3.DatabaseError:  # not a database (truncated, overwritten): start afresh
            self._start_afresh(None)

    def _start_afresh(self, damaged: sqlite3.Connection | None) -> None:
        """The file moved aside (to *.damaged) and a new store opened in its place, unless
        another process replaced it already (it opens, or is another file than `damaged`'s)."""
        with locked(self.path.with_name(f".{self.path.name}.lock")):
            if damaged is not None:
                damaged.close()
                if _inode(self.path) == self._inode:
                    self._move_aside()
            try:
                self.db = _open(self.path)
            except sqlite3.DatabaseError:
                self._move_aside()
                self.db = _open(self.path)
            self._inode = _inode(self.path)

    def _move_aside(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.replace(f"{self.path}{suffix}", f"{self.path}.damaged{suffix}")

    def close(self) -> None:
        self.db.close()

    # -- measurements ---------------------------------------------------------------------------
    # A measurement is kept as the JSON of Measurement.to_json(), the object measure() returned
    # when these were dicts, so caches written before the records read back unchanged.
    def get_measurements(self, keys: list[str]) -> dict[str, Measurement]:
        """The stored measurements of those of `keys` that are in the store (a damaged value
        counts as absent: it is measured again and overwritten)."""
        out = {}
        for k, v in self._get("measurements", keys):
            with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                found = Measurement.from_json(json.loads(v))
                if _sound(found):
                    out[k] = found
        return out

    def put_measurements(self, items: dict[str, Measurement]) -> None:
        self._put("measurements", ((k, json.dumps(v.to_json())) for k, v in items.items()))

    # -- features (compiler.tune.space.FeatureCache) ----------------------------------------------
    def get_features(self, key: str) -> list[float] | None:
        found = dict(self._get("features", [source_digest(features=True) + ":" + key]))
        try:
            value = json.loads(next(iter(found.values()))) if found else None
        except (ValueError, TypeError):
            return None
        ok = isinstance(value, list) and all(isinstance(x, (int, float)) for x in value)
        return value if ok else None  # a damaged value counts as absent

    def put_features(self, items: dict[str, list[float]]) -> None:
        prefix = source_digest(features=True) + ":"
        self._put("features", ((prefix + k, json.dumps(v)) for k, v in items.items()))

    # -- plumbing -----------------------------------------------------------------------------------
    # A file damaged past its header (a malformed page, a table dropped or replaced, text that is
    # not UTF-8) is found only when read or written: it is moved aside and the work goes on in a
    # new store, as for a file that does not open.
    def _get(self, table: str, keys: list[str]) -> list[tuple[str, str]]:
        try:
            return self._select(table, keys)
        except sqlite3.DatabaseError:
            self._start_afresh(self.db)
            return self._select(table, keys)

    def _select(self, table: str, keys: list[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            out += self.db.execute(f"SELECT key, value FROM {table} WHERE key IN ({marks})", chunk).fetchall()
        return out

    def _put(self, table: str, rows: Iterable[tuple[str, str]]) -> None:
        rows = list(rows)
        try:
            with self.db:
                self.db.executemany(f"INSERT OR REPLACE INTO {table} (key, value) VALUES (?, ?)", rows)
        except sqlite3.DatabaseError:
            self._start_afresh(self.db)
            with self.db:
                self.db.executemany(f"INSERT OR REPLACE INTO {table} (key, value) VALUES (?, ?)", rows)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _sound(m: Measurement) -> bool:
    """A measurement of a string status and no or non-negative integer cycles (a damaged value
    counts as absent)."""
    cycles_ok = m.cycles is None or (isinstance(m.cycles, int) and not isinstance(m.cycles, bool)
                                     and m.cycles >= 0)
    return isinstance(m.status, str) and cycles_ok
