"""`codesign bench sweep-eval`: the sweep's evaluation of a hardware point on ResNet-18, timed.

`run` evaluates N random valid points of a realistic space (batch 1/2, block_in and block_out
8..32, the four scratchpads, bus width, requests in flight) in one or more processes (forked
after the model is prepared, as the sweep's pool is) and reports points per second, CPU seconds
per point and the seconds by phase (quantization once, then compile, timing model, search per
point).  `codesign bench sweep-eval --quality` (codesign/bench/sweep_quality.py) checks the chosen
schedules against each layer's exhaustive best.

Measured on this 2-core machine (quiet), `--points 1000 --workers 2`: 436 s for the 1,000
points (0.83 s per point per worker: compile 0.39, timing model 0.41, search 0.02), 10,546
streams compiled and 34,178 re-encoded, 32,950 timing runs of which 11,773 answered from an
earlier run, 2.5 candidates measured per operator.  The first ~10 points cost ~2.9 s each (the
ranker is cold and measures more); the evaluation before the program cache and the ranker took
2.6 s per point.  (That ranker learned across each worker's points.)

Since each point's ranker starts from a prior learned once on 8 fixed calibration points
(`calibration_configs`, in the evaluator's preparation, `calibration_s`), `--points 100
--workers 2`, before / after on the same loaded machine, in CPU seconds (wall times there
were 2-4x the CPU): 242 / 209 CPU s in all, of which 14 / 38 preparing (the calibration
~24 s, serial, once) and 2.28 / 1.71 per point in the workers; 2.75 / 2.44 candidates per
operator; mean latency of the chosen schedules 9,009,782 / 9,023,849 cycles (+0.16%).  With
that prior, `--points 1000 --workers 2` on a quiet machine: 397 s (MARGIN 0.05); with the
ranker's burst-latency and residual features and MARGIN 0.08 (schedules within 5% of each
layer's best on 96.9% of layers instead of 94.2%): 548 s, 578 s with the preparation (1.06 CPU
s per point, 3.11 candidates measured per operator, 12,334 streams compiled, 40,602 timing runs).
"""

from __future__ import annotations

import multiprocessing
import random
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from codesign.sweep.evaluate import CALIBRATION_POINTS, Evaluator
from codesign.sweep.records import WorkloadSpec
from codesign.sweep.schedules import MEASURED
from hw.config import AcceleratorConfig, ConfigError
from hw.errors import InputError

SPACE: dict[str, list[int]] = {
    "batch": [1, 2], "block_in": [8, 16, 32], "block_out": [8, 16, 32],
    "uop_bytes": [8192, 16384, 32768], "inp_bytes": [16384, 32768, 65536],
    "wgt_bytes": [65536, 131072, 262144, 524288], "acc_bytes": [32768, 65536, 131072, 262144],
    "bus_bits": [64, 128, 256], "mem_inflight": [4, 8, 16],
}


CALIBRATION_SEED = 1_000_000  # the ranker's calibration points: not the seeds the benches evaluate


def calibration_configs(count: int = CALIBRATION_POINTS) -> list[AcceleratorConfig]:
    """The configs the benches' evaluators learn their ranker's prior on (fixed: every run alike)."""
    return random_points(count, CALIBRATION_SEED)


def random_points(count: int, seed: int) -> list[AcceleratorConfig]:
    """`count` distinct valid configs drawn from SPACE (vta's other parameters)."""
    rng = random.Random(seed)
    out: dict[str, AcceleratorConfig] = {}
    for _ in range(count * 50):
        if len(out) == count:
            break
        params = {name: rng.choice(values) for name, values in SPACE.items()}
        try:
            cfg = AcceleratorConfig(name="point", **params)
        except ConfigError:
            continue
        out.setdefault(cfg.fingerprint(), cfg)
    return list(out.values())


@dataclass(frozen=True)
class SpeedReport:
    """`phases_s` and `cpu_s` add up the workers' seconds; `wall_s` is the whole run's."""

    points: int
    seed: int
    workers: int
    prepare_s: float  # quantization and the ranker's calibration, once, before the workers start
    calibration_s: float
    calibration_points: int
    wall_s: float
    points_per_s: float
    s_per_point: float
    cpu_s_per_point: float
    phases_s: dict[str, float]
    programs_compiled: int
    programs_reused: int
    timing_runs: int
    timing_reused: int
    measured_per_operator: float
    mean_cycles: float
    measured: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_SHARED: dict[str, Any] = {}  # the evaluator, inherited by forked workers


def run(points: int = 20, seed: int = 0, model: str = "resnet18", measured: int = MEASURED,
        workers: int = 1) -> SpeedReport:
    """Evaluate `points` random points in `workers` processes forked after preparing the model."""
    if points < 1:
        raise InputError(f"--points must be at least 1, not {points}")
    if workers < 1:
        raise InputError(f"--workers must be at least 1, not {workers}")
    start = time.perf_counter()
    evaluator = Evaluator([WorkloadSpec(model, model)], measured=measured, calibration=calibration_configs())
    _SHARED["evaluator"] = evaluator
    prepare_s = time.perf_counter() - start
    configs = random_points(points, seed)
    shares = [configs[w::workers] for w in range(workers)]
    start = time.perf_counter()
    if workers == 1:
        parts = [_evaluate_share(shares[0])]
    else:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_evaluate_share, shares)
    wall_s = time.perf_counter() - start
    n = sum(len(p["cycles"]) for p in parts)
    total = {k: sum(p[k] for p in parts) for k in ("misses", "hits", "runs", "reruns", "cpu_s", "tried",
                                                     "choices")}
    phases: dict[str, float] = {}
    for p in parts:
        for phase, sec in p["phases"].items():
            phases[phase] = round(phases.get(phase, 0.0) + sec, 3)
    return SpeedReport(n, seed, workers, round(prepare_s, 3), round(evaluator.calibration_s, 3),
                       evaluator.calibration_points, round(wall_s, 3), round(n / wall_s, 3),
                       round(wall_s / n, 3), round(total["cpu_s"] / n, 3), phases, total["misses"],
                       total["hits"], total["runs"], total["reruns"],
                       round(total["tried"] / max(total["choices"], 1), 3),
                       float(np.mean([c for p in parts for c in p["cycles"]])), measured)


def _evaluate_share(configs: list[AcceleratorConfig]) -> dict[str, Any]:
    """One worker's points: phases, cycles, its cache's counters and its CPU seconds."""
    evaluator: Evaluator = _SHARED["evaluator"]
    phases: dict[str, float] = {}
    cycles: list[int] = []
    cpu = time.process_time()
    for cfg in configs:
        results, wall = evaluator(cfg)
        cycles.append(results[0].cycles)
        for phase, sec in wall.items():
            phases[phase] = phases.get(phase, 0.0) + sec
    cache = evaluator.cache
    return {"phases": phases, "cycles": cycles, "misses": cache.misses, "hits": cache.hits,
            "runs": cache.runs, "reruns": cache.reruns, "cpu_s": time.process_time() - cpu,
            "tried": evaluator.measured_total, "choices": evaluator.chosen_total}


__all__ = ["CALIBRATION_SEED", "SPACE", "SpeedReport", "calibration_configs", "random_points", "run"]
