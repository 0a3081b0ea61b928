"""Fuzzing tuning logs: the accelerator's JSONL trial log (`codesign tune --log`, read back to
resume: codesign.tune.log.read) and the CPU target's JSON log (`codesign compile|run|compare
--tuning-log`: compiler.tune.cpu.read_log).

Bases: a log of three trials of a conv on `tiny` (ok, ok, error) written by `log.append`, and a
CPU log of two convolutions written by `write_log`.  A case reads the log as its command does and
uses it as the command would: the best trial of the workload (its cycles a non-negative integer,
the least of the ok trials), or the table of tuned schedules (operator key -> knobs).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from codesign.fuzz.engine import Kind
from codesign.fuzz.mutators import mutate_bytes, mutate_json, mutate_tree, pick
from codesign.tune import log
from codesign.tune.records import Measurement
from compiler.ops.accel import Conv2d, Conv2dSpec
from compiler.target import AcceleratorTarget
from compiler.target.cpu import CpuTarget
from compiler.tune.cpu import ConvTuning, read_log, write_log
from compiler.tune.workload import Workload
from hw.config import PRESETS

TINY = PRESETS["tiny"]
CPU = CpuTarget("x86_64-unknown-linux-gnu", "znver3", "+avx2,+fma")


@functools.cache
def workload() -> Workload:
    return Workload.of(Conv2d(Conv2dSpec(1, 8, 8, 8, 16, 3, 1, 1), AcceleratorTarget(TINY)))


def _trial_log() -> bytes:
    trials = [(Measurement("ok", cycles=1200, compile_s=0.1, run_s=0.2), {"tile_h": 2}),
              (Measurement("ok", cycles=900, compile_s=0.1, run_s=0.2), {"tile_h": 4}),
              (Measurement.failed("error", "the program failed"), {"tile_h": 8})]
    records = [log.record(workload(), TINY, "timing", knobs, m, method="model", trial=i, cached=False)
               for i, (m, knobs) in enumerate(trials, 1)]
    return "".join(json.dumps(r.to_json()) + "\n" for r in records).encode()


def _cpu_log() -> bytes:
    import tempfile

    params = {"shape": (1, 8, 6, 6), "weight_shape": (8, 8, 3, 3), "pads": 1}
    results = [ConvTuning("conv2d", params, {"pixels": 3, "order": "rows"}, 2e-3, 1e-3, 9),
               ConvTuning("conv2d", {**params, "shape": (1, 8, 4, 4)}, {}, 2e-3, 2e-3, 9)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cpu.json"
        write_log(path, results, model="m.onnx", precision="fp32", target=CPU)
        return path.read_bytes()


def mutate_line(data: bytes, rng: np.random.Generator) -> bytes:
    """One line of a JSONL log changed at one place, dropped, doubled or cut short."""
    lines = data.decode().splitlines()
    i = int(rng.integers(len(lines)))
    choice = int(rng.integers(4))
    if choice == 0:
        lines[i] = json.dumps(mutate_tree(json.loads(lines[i]), rng))
    elif choice == 1:
        del lines[i]
    elif choice == 2:
        lines.insert(i, pick(rng, ("", "[]", "null", "{}", '"x"', lines[i] * 2)))
    else:
        lines[i] = lines[i][: int(rng.integers(len(lines[i]) + 1))]
    return ("\n".join(lines) + "\n").encode()


def check_trials(path: Path) -> str:
    """log.read, then the workload's best trial on tiny: "accepted" when its cycles are the
    least non-negative integer of the ok trials (or there is none)."""
    records = log.read(path)
    best = log.best(records, workload(), TINY)
    if best is not None:
        cycles = [r.cycles for r in log.matching(records, workload(), TINY) if r.status == "ok" and r.cycles]
        assert isinstance(best.cycles, int) and best.cycles >= 0 and best.cycles == min(cycles), best
    return "accepted"


def check_cpu(path: Path) -> str:
    """read_log on the znver3 host: "accepted" when the table maps operator keys (strings) to
    knobs (an object of integer or string values)."""
    table = read_log(path, CPU)
    for key, knobs in table.items():
        assert isinstance(key, str), f"a key {key!r}"
        assert isinstance(knobs, dict) and all(isinstance(k, str) for k in knobs), f"knobs {knobs!r}"
        assert all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in knobs.values()), knobs
    return "accepted"


TRIALS = Kind(name="tuning-log", suffix=".jsonl", bases={"tiny-conv": _trial_log},
              mutations={"line": mutate_line, "bytes": mutate_bytes}, check=check_trials)
CPU_LOG = Kind(name="cpu-tuning-log", suffix=".json", bases={"znver3": _cpu_log},
               mutations={"json": mutate_json, "bytes": mutate_bytes}, check=check_cpu)



# -- the tuning cache (codesign.exec.store: SQLite, key -> JSON) ------------------------------------
_KEYS = ("m1", "m2", "m3")


def _cache() -> bytes:
    import tempfile

    from codesign.exec.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "cache.sqlite")
        store.put_measurements({"m1": Measurement("ok", cycles=900, run_s=0.1),
                                "m2": Measurement.failed("error", "the program failed")})
        store.put_features({"f1": [1.0, 2.5, 0.0]})
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        return (Path(tmp) / "cache.sqlite").read_bytes()


def mutate_cache(data: bytes, rng: np.random.Generator) -> bytes:
    """One row's key or JSON value damaged, a table dropped or replaced, through SQL."""
    import contextlib
    import sqlite3
    import tempfile

    value = pick(rng, ("", "null", "[]", "{}", '{"status": 1}', '{"status": "ok", "cycles": "x"}',
                       '{"status": "ok", "cycles": -5}', '{"status": "ok", "cycles": 1e400}', "[1, NaN]",
                       '["a"]', "[true]", b"\xff\x00", 7, None))
    statement = pick(rng, ("UPDATE measurements SET value = ? WHERE key = 'm1'",
                           "UPDATE features SET value = ?", "UPDATE measurements SET key = ?",
                           "DROP TABLE measurements", "DROP TABLE features",
                           "CREATE TABLE IF NOT EXISTS x (a); DROP TABLE measurements; "
                           "CREATE TABLE measurements (key INTEGER, value BLOB, extra)"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        path.write_bytes(data)
        db = sqlite3.connect(path, isolation_level=None)
        with contextlib.suppress(sqlite3.Error):
            if "?" in statement:
                db.execute(statement, (value,))
            else:
                db.executescript(statement)
        db.close()
        return path.read_bytes()


def check_cache(path: Path) -> str:
    """The cache opened as a tuning run opens it (a damaged file is moved aside and started
    afresh), read, written and read back: "accepted" when every measurement read is a
    Measurement of a string status and integer (or no) cycles, every feature vector a list
    of numbers, and what was written reads back."""
    from codesign.exec.store import Store

    store = Store(path)
    try:
        for m in store.get_measurements(list(_KEYS)).values():
            assert isinstance(m.status, str), f"status {m.status!r}"
            assert m.cycles is None or (isinstance(m.cycles, int) and not isinstance(m.cycles, bool)
                                        and m.cycles >= 0), f"cycles {m.cycles!r}"
        features = store.get_features("f1")
        assert features is None or all(isinstance(x, (int, float)) for x in features), features
        fresh = Measurement("ok", cycles=77)
        store.put_measurements({"m3": fresh})
        assert store.get_measurements(["m3"]) == {"m3": fresh}, "a measurement written does not read back"
    finally:
        store.close()
    return "accepted"


CACHE = Kind(name="tuning-cache", suffix=".sqlite", bases={"small": _cache},
             mutations={"sql": mutate_cache, "bytes": mutate_bytes}, check=check_cache)
