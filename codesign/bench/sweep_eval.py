"""`codesign bench sweep-eval`: the sweep's evaluation of a hardware point on ResNet-18, timed.

`run` evaluates N random valid points of a realistic space (batch 1/2, block_in and block_out
8..32, the four scratchpads, bus width, requests in flight) in one process and reports points
per second and the seconds by phase (quantization once, then compile, timing model, search per
point).  `quality` checks the chosen schedules: on a few points, each layer's chosen schedule's
timing cycles against the best over its whole schedule space (every point that fits and issues
at most compiler.tune.space.MAX_INSNS instructions), measured on the timing model.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from codesign.sweep.evaluate import Evaluator
from codesign.sweep.operators import at_batch, batch_for, is_shallow, make_operator, model_batch
from codesign.sweep.records import WorkloadSpec
from codesign.sweep.schedules import ProgramCache
from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from compiler.tune.space import build_space
from hw.config import AcceleratorConfig, ConfigError
from hw.errors import InputError
from sim.backends import make_backend

SPACE: dict[str, list[int]] = {
    "batch": [1, 2], "block_in": [8, 16, 32], "block_out": [8, 16, 32],
    "uop_bytes": [8192, 16384, 32768], "inp_bytes": [16384, 32768, 65536],
    "wgt_bytes": [65536, 131072, 262144, 524288], "acc_bytes": [32768, 65536, 131072, 262144],
    "bus_bits": [64, 128, 256], "mem_inflight": [4, 8, 16],
}


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
    points: int
    seed: int
    prepare_s: float
    wall_s: float
    points_per_s: float
    s_per_point: float
    phases_s: dict[str, float]
    programs_compiled: int
    programs_reencoded: int
    mean_cycles: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(points: int = 20, seed: int = 0, model: str = "resnet18") -> SpeedReport:
    if points < 1:
        raise InputError(f"--points must be at least 1, not {points}")
    start = time.perf_counter()
    evaluator = Evaluator([WorkloadSpec(model, model)])
    prepare_s = time.perf_counter() - start
    phases: dict[str, float] = {}
    cycles = []
    start = time.perf_counter()
    for cfg in random_points(points, seed):
        results, wall = evaluator(cfg)
        cycles.append(results[0].cycles)
        for phase, s in wall.items():
            phases[phase] = phases.get(phase, 0.0) + s
    wall_s = time.perf_counter() - start
    n = len(cycles)
    return SpeedReport(n, seed, round(prepare_s, 3), round(wall_s, 3), round(n / wall_s, 3),
                       round(wall_s / n, 3),
                       {k: round(v, 3) for k, v in phases.items()},
                       evaluator.cache.misses, evaluator.cache.hits, float(np.mean(cycles)))


@dataclass(frozen=True)
class QualityReport:
    points: int
    layers: int
    median_gap: float
    p95_gap: float
    max_gap: float
    within_2pct: float
    within_5pct: float
    gaps: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def quality(points: int = 2, seed: int = 0, model: str = "resnet18") -> QualityReport:
    """Each accelerator layer's chosen cycles over its exhaustive best, on `points` random points."""
    evaluator = Evaluator([WorkloadSpec(model, model)])
    rows = []
    for cfg in random_points(points, seed):
        results, _ = evaluator(cfg)
        chosen = {x.name: x for x in results[0].layers if x.placement == "accel"}
        for step in evaluator.workloads[0].steps_for(cfg.block_in):
            if step.name not in chosen or step.spec is None:
                continue
            target = AcceleratorTarget(cfg)
            if is_shallow(step, target):
                continue
            spec = at_batch(step.spec, batch_for(model_batch(step.spec), cfg.batch))
            best = _exhaustive(make_operator(spec, target))
            cycles = chosen[step.name].cycles or 0
            rows.append({"config": cfg.to_dict(), "layer": step.name, "chosen": cycles, "best": best,
                         "gap": cycles / best - 1})
    gaps = np.array([r["gap"] for r in rows])
    return QualityReport(points, len(rows), float(np.median(gaps)), float(np.percentile(gaps, 95)),
                         float(gaps.max()), float((gaps <= 0.02).mean()), float((gaps <= 0.05).mean()), rows)


def _exhaustive(op: Any) -> int:
    """The fewest timing cycles over `op`'s schedule space."""
    backend = make_backend("timing", op.target.cfg)
    cache = ProgramCache()
    knobs = [p for p in op.points() if op.fits(p)] if op.op == "eltwise" else build_space(op).points
    best: int | None = None
    for k in knobs:
        try:
            cycles = int(backend.run(cache.program(op, k), None).stats.cycles or 0)  # type: ignore[arg-type]
        except ScheduleError:
            continue
        best = cycles if best is None or cycles < best else best
    assert best is not None, f"{op.op}: no point of its space compiles"
    return best


__all__ = ["SPACE", "QualityReport", "SpeedReport", "quality", "random_points", "run"]
