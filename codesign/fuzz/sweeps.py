"""Fuzzing a sweep's inputs: space files (`codesign sweep SPACE.toml`: codesign.sweep.space.
load_space) and stores (`codesign sweep --store FILE.db --resume`, `codesign report STORE`:
codesign.sweep.store.SweepStore).

Space bases: the packaged `small` space and a tiny one.  A case loads the space and takes its
first points; an accepted space must have at least one point, configs that pass their own
validation, and strict JSON (no NaN or Infinity) for its `to_json`.
Store bases: a store of the tiny space with ok, infeasible and failed points, and a
confirmation.  A case damages the SQLite file through SQL (a field of a row, a meta key, a
table or a column dropped) or its bytes, then reads it as a report does (meta, counts, every
point, confirmations) and opens it to resume the tiny space's sweep.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import tempfile
import tomllib
from pathlib import Path

import numpy as np

from codesign.fuzz.engine import Kind, run_cli, strict_json
from codesign.fuzz.mutators import HOSTILE, dump_toml, mutate_bytes, mutate_tree, pick
from codesign.sweep.records import PointResult
from codesign.sweep.space import PACKAGED, load_space, space_from_text
from codesign.sweep.store import STATUSES, SweepStore

TINY_SPACE = '''name = "tiny-fuzz"
base = "tiny"
objectives = ["latency", "area"]
[params]
block_in = [4, 8]
block_out = [4, 8, 16]
wgt_bytes = ["4KiB", "8KiB"]
[constraints]
max_sram_bytes = "12KiB"
[[workloads]]
model = "mlp"
'''


# -- spaces -------------------------------------------------------------------------------------
def mutate_space(data: bytes, rng: np.random.Generator) -> bytes:
    """The space's TOML parsed, changed at one place, and written back."""
    tree = mutate_tree(tomllib.loads(data.decode()), rng)
    return dump_toml(tree if isinstance(tree, dict) else {"name": tree}).encode()


def mutate_lines(data: bytes, rng: np.random.Generator) -> bytes:
    """A line of the TOML text dropped, doubled, cut short or swapped with another."""
    lines = data.decode().splitlines()
    i, j = int(rng.integers(len(lines))), int(rng.integers(len(lines)))
    choice = int(rng.integers(4))
    if choice == 0:
        del lines[i]
    elif choice == 1:
        lines.insert(i, lines[i])
    elif choice == 2:
        lines[i] = lines[i][: int(rng.integers(len(lines[i]) + 1))]
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return ("\n".join(lines) + "\n").encode()


def check_space(path: Path) -> str:
    """load_space and the first three feasible points (a space may have none: its census says
    why): "accepted" when every config is valid and the space's JSON is strict."""
    space = load_space(path)
    for point in itertools.islice(iter(space), 3):
        point.config.to_dict()
    json.dumps(space.to_json(), allow_nan=False)
    return "accepted"


SPACES = Kind(
    name="space", suffix=".toml",
    bases={"small": lambda: (PACKAGED / "small.toml").read_bytes(), "tiny": TINY_SPACE.encode},
    mutations={"tree": mutate_space, "lines": mutate_lines, "bytes": mutate_bytes},
    check=check_space,
)


# -- stores -------------------------------------------------------------------------------------
def _store() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        space = space_from_text(TINY_SPACE, path=Path(tmp) / "tiny.toml")
        points = list(space)
        with SweepStore.open(path, space, strategy="grid", seed=0, resume=False) as store:
            for i, point in enumerate(points[:4]):
                metrics = {"latency_cycles": 1e6 / point.config.macs_per_cycle, "area_mm2": 0.01 * (i + 1)}
                store.record(point, "ok", result=PointResult(point.id, (), metrics, {}), wall_s=0.5)
            store.record(points[4], "infeasible", reason="over the SRAM budget")
            store.record(points[5], "crash", reason="the worker died", attempts=2)
            store.record_confirmation(points[0].id, "mlp", {"workload": "mlp", "fsim_exact": True,
                                                            "rtl_exact": True, "timing_cycles": 1234,
                                                            "rtl_cycles": 1234})
        return path.read_bytes()


_DAMAGES = (
    "UPDATE points SET {col} = ? WHERE rowid = (SELECT min(rowid) FROM points)",
    "UPDATE meta SET value = ? WHERE key = '{key}'",
    "DELETE FROM meta WHERE key = '{key}'",
    "UPDATE confirmations SET {ccol} = ?",
    "DROP TABLE {table}",
    "ALTER TABLE points DROP COLUMN {col}",
    "INSERT INTO points (id, seq, config, status, attempts, created) VALUES ('x', ?, '{{}}', 'ok', 1, 0)",
)
_COLUMNS = ("id", "seq", "config", "status", "result", "reason", "attempts", "wall_s", "latency_cycles",
            "area_mm2", "created")
_KEYS = ("schema_version", "space_toml", "space_digest", "strategy", "seed", "objectives")
_VALUES = (None, -1, 2 ** 62, 1.5, float("nan"), "", "x", "{}", "[]", "null", '{"point_id": 1}', "99",
           b"\x00\xff", "ok", "crash")


def mutate_sql(data: bytes, rng: np.random.Generator) -> bytes:
    """One damage done through SQL: a row's field, a meta key changed or deleted, a
    confirmation's field, a table or column dropped, a row of the wrong shape."""
    statement = pick(rng, _DAMAGES).format(col=pick(rng, _COLUMNS), key=pick(rng, _KEYS),
                                           ccol=pick(rng, ("id", "workload", "result")),
                                           table=pick(rng, ("meta", "points", "confirmations")))
    hostile = tuple(v for v in HOSTILE if isinstance(v, (int, float, str)) and not isinstance(v, bool))
    value = pick(rng, _VALUES + hostile)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        path.write_bytes(data)
        db = sqlite3.connect(path, isolation_level=None)
        with contextlib.suppress(sqlite3.Error, OverflowError):  # a damage this file cannot take
            db.execute(statement, (value,) if "?" in statement else ())
        db.close()
        return path.read_bytes()


def mutate_pages(data: bytes, rng: np.random.Generator) -> bytes:
    """Bytes past the SQLite header flipped (a damaged page), or the file cut short."""
    buf = bytearray(data)
    if rng.integers(3) == 0:
        return bytes(buf[: int(rng.integers(100, len(buf)))])
    for _ in range(int(rng.integers(1, 9))):
        buf[int(rng.integers(100, len(buf)))] = int(rng.integers(256))
    return bytes(buf)


def check_store(path: Path) -> str:
    """The store read as a report reads it, then opened to resume the tiny sweep: "accepted"
    when every point has a known status."""
    with SweepStore.read(path) as store:
        store.meta()
        counts = store.counts()
        points = store.points()
        store.confirmations()
    assert all(p.status in STATUSES for p in points), "a point of an unknown status"
    assert sum(counts.values()) == len(points), "counts unlike the points"
    space = space_from_text(TINY_SPACE, path=path.with_name("tiny.toml"))
    SweepStore.open(path, space, strategy="grid", seed=0, resume=True).close()
    return "accepted"


STORES = Kind(name="store", suffix=".db", bases={"tiny": _store},
              mutations={"sql": mutate_sql, "pages": mutate_pages, "bytes": mutate_bytes}, check=check_store)


def check_report(path: Path) -> str:
    """check_store, then `codesign report STORE -o DIR --json` (figures and the page)."""
    result = check_store(path)
    if result != "accepted":
        return result
    result, out = run_cli(["report", str(path), "-o", str(path.with_name("report")), "--json"])
    if result == "accepted":
        strict_json(out)
    return result


# `codesign report` draws every figure: ~2 s a case, so a budget of its own
REPORTS = Kind(name="store-report", suffix=".db", bases=STORES.bases, mutations=STORES.mutations,
               check=check_report)
