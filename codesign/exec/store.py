"""The on-disk cache of tuning work: measured points and lowered points' features.

One SQLite file in WAL mode (readers never block the writer) under `$CODESIGN_CACHE/tune/`.  Every key
starts with a digest of the sources that decide a Program and its cycles (the operator compiler,
hw/, and the simulator of the backend), so editing them makes earlier entries unreachable and
re-running an unchanged tree costs lookups only.  Keys also carry the workload, every config
parameter (the DRAM model too) and the knobs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from codesign.tune.records import Measurement
from hw.cache import cache_root

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


class Store:
    """Key -> JSON value, for measurements and features; safe to share between processes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_root() / "tune" / "cache.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=60)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        for table in ("measurements", "features"):
            self.db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value TEXT)")
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    # -- measurements ---------------------------------------------------------------------------
    # A measurement is kept as the JSON of Measurement.to_json(), the object measure() returned
    # when these were dicts, so caches written before the records read back unchanged.
    def get_measurements(self, keys: list[str]) -> dict[str, Measurement]:
        """The stored measurements of those of `keys` that are in the store."""
        return {k: Measurement.from_json(json.loads(v)) for k, v in self._get("measurements", keys)}

    def put_measurements(self, items: dict[str, Measurement]) -> None:
        self._put("measurements", ((k, json.dumps(v.to_json())) for k, v in items.items()))

    # -- features (compiler.tune.space.FeatureCache) ----------------------------------------------
    def get_features(self, key: str) -> list[float] | None:
        found = dict(self._get("features", [source_digest(features=True) + ":" + key]))
        return json.loads(next(iter(found.values()))) if found else None

    def put_features(self, items: dict[str, list[float]]) -> None:
        prefix = source_digest(features=True) + ":"
        self._put("features", ((prefix + k, json.dumps(v)) for k, v in items.items()))

    # -- plumbing -----------------------------------------------------------------------------------
    def _get(self, table: str, keys: list[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            out += self.db.execute(f"SELECT key, value FROM {table} WHERE key IN ({marks})", chunk).fetchall()
        return out

    def _put(self, table: str, rows: Iterable[tuple[str, str]]) -> None:
        with self.db:
            self.db.executemany(f"INSERT OR REPLACE INTO {table} (key, value) VALUES (?, ?)", rows)
