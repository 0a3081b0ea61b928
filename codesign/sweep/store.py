"""A sweep's store: one SQLite file (WAL, synchronous=NORMAL), the sweep's source of truth.

It holds the space (its TOML text and digest), the run settings (strategy, seed), and every point
the sweep reached: its config, status ('ok', or 'infeasible', 'error', 'timeout', 'crash' with the
reason), the PointResult JSON, the objectives' metrics as columns for fast queries, attempts,
wall time and the order it finished in.  One process writes (the sweep's coordinator), a batch
of rows per transaction; readers (reports) may open it at any time.  A killed sweep loses at
most the rows of its last unfinished batch (`commit_s` of work), never a committed one, and the
file stays consistent (reference/sweep.md §2.1 measured 50 SIGKILLs during writes).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space
from hw.errors import InputError

SCHEMA_VERSION = 1
STATUSES = ("ok", "infeasible", "error", "timeout", "crash")
FAILED = ("error", "timeout", "crash")
METRIC_COLUMNS = ("latency_cycles", "latency_ms", "area_mm2", "energy_uj", "edp")
_HEADER = b"SQLite format 3\x00"
# the RTL confirmation of a design's workloads (codesign/sweep/confirm.py), one row each
_CONFIRMATIONS = ("CREATE TABLE IF NOT EXISTS confirmations (id TEXT NOT NULL, workload TEXT NOT NULL, "
                  "result TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (id, workload))")
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE points (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, config TEXT NOT NULL, "
    "status TEXT NOT NULL, result TEXT, reason TEXT, attempts INTEGER NOT NULL, wall_s REAL, "
    + ", ".join(f"{c} REAL" for c in METRIC_COLUMNS) + ", created REAL NOT NULL)",
    "CREATE INDEX points_status ON points (status)",
    "CREATE INDEX points_seq ON points (seq)",
    _CONFIRMATIONS,
)


class StoreError(InputError):
    """A store file that cannot hold this sweep; the message names the file and why."""


@contextlib.contextmanager
def _damage_named(path: Path) -> Iterator[None]:
    """A damaged file (SQLite's own complaint, a column or table missing, a field that is not
    the JSON or the record it should be) as a one-line StoreError."""
    try:
        yield
    except StoreError:
        raise
    except (sqlite3.Error, ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        first = (str(exc).splitlines() or [""])[0][:200]
        raise StoreError(f"{path}: a damaged sweep store ({type(exc).__name__}: {first})") from None


def _reader(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def read(self: SweepStore, *args: Any, **kwargs: Any) -> Any:
        with _damage_named(self.path):
            return method(self, *args, **kwargs)
    return read


@dataclass(frozen=True)
class StoredPoint:
    """One row of the store."""

    id: str
    seq: int
    config: dict[str, Any]
    status: str
    result: PointResult | None
    reason: str | None
    attempts: int
    wall_s: float | None

    @property
    def metrics(self) -> dict[str, float]:
        return dict(self.result.metrics) if self.result is not None else {}


class SweepStore:
    """Open with `SweepStore.open`; `record` rows, `flush` (also every `commit_s` or 100 rows)."""

    def __init__(self, path: Path, db: sqlite3.Connection, *, commit_s: float = 0.5) -> None:
        self.path, self.db, self.commit_s = path, db, commit_s
        self.pending: list[tuple[Any, ...]] = []
        self.last_commit = time.monotonic()
        self.next_seq = int(db.execute("SELECT coalesce(max(seq), -1) + 1 FROM points").fetchone()[0])

    # -- opening --------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, space: Space, *, strategy: str, seed: int, resume: bool,
             commit_s: float = 0.5) -> SweepStore:
        """The store at `path` for a sweep of `space`: made when new; continued when it holds
        this space's sweep with these settings and `resume` is set; otherwise StoreError."""
        path = Path(path)
        db = _connect(path)
        try:
            with _damage_named(path):
                tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not tables:
                    _create(db, space, strategy, seed)
                else:
                    _check(path, db, tables, space, strategy, seed, resume)
                db.execute("PRAGMA journal_mode=WAL")  # only once the file is known to be a sweep store
                db.execute("PRAGMA synchronous=NORMAL")
                return cls(path, db, commit_s=commit_s)
        except BaseException:
            db.close()
            raise

    @classmethod
    def read(cls, path: str | Path) -> SweepStore:
        """An existing store, opened to read it (reports); StoreError when it is not one."""
        path = Path(path)
        if not path.is_file():
            raise StoreError(f"{path}: no such store")
        db = _connect(path)
        try:
            with _damage_named(path):
                tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                _check_schema(path, db, tables)
                return cls(path, db)
        except BaseException:
            db.close()
            raise

    def close(self) -> None:
        self.flush()
        self.db.close()

    def __enter__(self) -> SweepStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------------
    def record(self, point: Point, status: str, *, result: PointResult | None = None,
               reason: str | None = None, attempts: int = 1, wall_s: float | None = None) -> None:
        """Add (or replace) `point`'s row; committed with its batch."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        metrics = result.metrics if result is not None else {}
        row = (point.id, self.next_seq, json.dumps(point.config.to_dict(), sort_keys=True), status,
               json.dumps(result.to_json(), separators=(",", ":")) if result is not None else None,
               reason, attempts, wall_s, *(metrics.get(c) for c in METRIC_COLUMNS), time.time())
        self.next_seq += 1
        self.pending.append(row)
        if len(self.pending) >= 100 or time.monotonic() - self.last_commit >= self.commit_s:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            marks = ",".join("?" * len(self.pending[0]))
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(f"INSERT OR REPLACE INTO points VALUES ({marks})", self.pending)
            self.db.execute("COMMIT")
            self.pending = []
        self.last_commit = time.monotonic()

    def record_confirmation(self, point_id: str, workload: str, result: dict[str, Any]) -> None:
        """Keep the confirmation of one workload of a design (committed at once: they are few)."""
        self.flush()
        self.db.execute(_CONFIRMATIONS)
        self.db.execute("INSERT OR REPLACE INTO confirmations VALUES (?, ?, ?, ?)",
                        (point_id, workload, json.dumps(result, sort_keys=True), time.time()))

    # -- reading --------------------------------------------------------------------------------
    @_reader
    def confirmations(self) -> dict[str, list[dict[str, Any]]]:
        """Each confirmed design's confirmations (one per workload), by point id."""
        tables = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "confirmations" not in tables:
            return {}
        out: dict[str, list[dict[str, Any]]] = {}
        for point_id, result in self.db.execute("SELECT id, result FROM confirmations ORDER BY id, workload"):
            found = json.loads(result)
            if not isinstance(found, dict):
                raise StoreError(f"{self.path}: a damaged sweep store (the confirmation of {point_id!r} is "
                                 f"{found!r}, not an object)")
            out.setdefault(point_id, []).append(found)
        return out

    @_reader
    def objectives(self) -> tuple[str, ...]:
        """The metrics the sweep optimizes (meta 'objectives'); StoreError when they are not a
        non-empty list of the store's metric columns."""
        found = json.loads(self.meta()["objectives"])
        if not (isinstance(found, list) and found and all(m in METRIC_COLUMNS for m in found)):
            raise StoreError(f"{self.path}: a damaged sweep store (objectives {found!r} are not a list of "
                             f"{', '.join(METRIC_COLUMNS)})")
        return tuple(found)

    @_reader
    def meta(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM meta").fetchall())

    @_reader
    def ids(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT id FROM points")}

    @_reader
    def counts(self) -> dict[str, int]:
        found = dict(self.db.execute("SELECT status, count(*) FROM points GROUP BY status").fetchall())
        return {status: int(found.get(status, 0)) for status in STATUSES}

    @_reader
    def points(self, status: str | None = None) -> list[StoredPoint]:
        """The stored points in the order they finished (only `status`'s when given)."""
        where, args = ("WHERE status = ?", (status,)) if status else ("", ())
        rows = self.db.execute("SELECT id, seq, config, status, result, reason, attempts, wall_s "
                               f"FROM points {where} ORDER BY seq", args)
        out = [StoredPoint(r[0], r[1], json.loads(r[2]), r[3],
                           PointResult.from_json(json.loads(r[4])) if r[4] is not None else None,
                           r[5], r[6], r[7]) for r in rows]
        for p in out:
            if p.status not in STATUSES:
                raise StoreError(f"{self.path}: point {p.id!r} has the unknown status {p.status!r}")
        return out


def _connect(path: Path) -> sqlite3.Connection:
    if path.is_file() and path.stat().st_size > 0:
        with path.open("rb") as f:
            if f.read(len(_HEADER)) != _HEADER:
                raise StoreError(f"{path}: not an SQLite file, so not a sweep store")
    try:
        db = sqlite3.connect(path, isolation_level=None, timeout=60)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open the store ({exc})") from None
    try:
        db.execute("SELECT count(*) FROM sqlite_master")
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # a schema of bytes that are not UTF-8
        db.close()
        raise StoreError(f"{path}: cannot open the store ({exc})") from None
    return db


def _create(db: sqlite3.Connection, space: Space, strategy: str, seed: int) -> None:
    db.execute("BEGIN IMMEDIATE")
    for statement in _SCHEMA:
        db.execute(statement)
    meta = {"schema_version": str(SCHEMA_VERSION), "space_name": space.name, "space_digest": space.digest,
            "space_path": space.path, "space_toml": space.text, "strategy": strategy, "seed": str(seed),
            "objectives": json.dumps(space.metrics), "created": str(time.time())}
    db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
    db.execute("COMMIT")


def _check_schema(path: Path, db: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    for table in ("meta", "points"):
        if table not in tables:
            raise StoreError(f"{path}: not a sweep store (it has no table {table!r})")
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path}: the store's schema version {version} is newer than this workbench's "
                         f"({SCHEMA_VERSION}); open it with a newer workbench")
    if version < SCHEMA_VERSION:
        raise StoreError(f"{path}: the store's schema version {version} is not {SCHEMA_VERSION}")
    return meta


def _shown(value: str | None) -> str:
    """A meta value in a message: as it is, or quoted where it would break the line."""
    return value if isinstance(value, str) and value.isprintable() else repr(value)


def _check(path: Path, db: sqlite3.Connection, tables: set[str], space: Space, strategy: str, seed: int,
           resume: bool) -> None:
    meta = _check_schema(path, db, tables)
    if meta.get("space_digest") != space.digest:
        raise StoreError(f"{path}: the store holds a sweep of another space ({meta.get('space_name')!r}, "
                         f"digest {_shown(meta.get('space_digest'))}), not of {space.name!r} "
                         f"(digest {space.digest}); use another --store")
    held = int(db.execute("SELECT count(*) FROM points").fetchone()[0])
    if held and not resume:
        raise StoreError(f"{path}: the store already holds {held} points of this sweep; pass --resume to "
                         "continue it, or use another --store")
    if held and (meta.get("strategy"), meta.get("seed")) != (strategy, str(seed)):
        started = f"strategy {_shown(meta.get('strategy'))} and seed {_shown(meta.get('seed'))}"
        raise StoreError(f"{path}: the sweep was started with {started}; resume it with those, not "
                         f"strategy {strategy} and seed {seed}")
    if not held:
        settings = [("strategy", strategy), ("seed", str(seed))]
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", settings)


__all__ = ["FAILED", "METRIC_COLUMNS", "SCHEMA_VERSION", "STATUSES", "StoreError", "StoredPoint",
           "SweepStore"]
