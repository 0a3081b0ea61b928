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
KIND = TRIALS
