"""`codesign bench sweep-eval --quality`: each layer's schedule chosen by the sweep's evaluation
against that layer's exhaustive best on the timing model, on random points of the realistic space.

"Exhaustive" is pruned, and says how: a layer's space holds up to ~1,200 fitting points, and the
ones with tiny tiles take seconds each to compile and run, so only the points whose analytic
estimate is within `window` times the best estimate are measured (at most `cap` of them, best
estimate first).  The prune is checked per layer (`safe`): the smallest ratio of timing cycles to
estimate seen on any measured point of the run, times the first pruned point's estimate, must be
at least the layer's best cycles, so that a pruned point no better estimated than any measured one
could not beat it.  The
chosen schedules come from one `Evaluator`, as in a sweep: its ranker's prior learned on the
benches' fixed calibration configs, each point starting from it (`warmup` points evaluated first
and not checked only warm the program cache: they no longer change a point's choices).

The exhaustive searches are most of the run (~25 min for 20 points) and do not depend on the
ranker: `--best-cache FILE` keeps them (each layer's best, and every measured point's rank, knobs
and cycles) in a JSON file, read when it exists and written after each point, so that scoring a
change to the schedule choice re-runs only the sweep's own evaluation (~2 min).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.bench.sweep_eval import calibration_configs, random_points
from codesign.sweep.evaluate import Evaluator
from codesign.sweep.operators import is_shallow, make_operator, padded
from codesign.sweep.programs import ProgramCache
from codesign.sweep.records import WorkloadSpec
from codesign.sweep.schedules import ranking
from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from hw.errors import InputError
from hw.program import ProgramError
from sim.backend import Backend, SimulationError
from sim.backends import make_backend

WINDOW = 1.6  # measure every point whose estimate is within this factor of the best estimate
CAP = 64  # at most this many per layer


@dataclass(frozen=True)
class QualityReport:
    points: int
    layers: int
    median_gap: float
    p95_gap: float
    max_gap: float
    within_2pct: float
    within_5pct: float
    measured_per_layer: float
    pruning_safe: float  # share of layers whose prune passed its check
    window: float
    cap: int
    wall_s: float
    gaps: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def quality(points: int = 20, seed: int = 0, model: str = "resnet18", *, warmup: int = 0,
            window: float = WINDOW, cap: int = CAP, best_cache: str | Path | None = None) -> QualityReport:
    """Each accelerator layer's chosen cycles over its (pruned) exhaustive best on `points` random
    points (after `warmup` others).  `best_cache`: a JSON file of the exhaustive searches (see
    BestCache), read if it exists and written after each point, so that scoring another ranker
    runs only the sweep's own choices."""
    if points < 1:
        raise InputError(f"--points must be at least 1, not {points}")
    start = time.perf_counter()
    store = BestCache(best_cache, window, cap)
    evaluator = Evaluator([WorkloadSpec(model, model)], calibration=calibration_configs())
    configs = random_points(points + warmup, seed)
    for cfg in configs[points:]:
        evaluator(cfg)
    rows: list[dict[str, Any]] = []
    cache = ProgramCache()
    for cfg in configs[:points]:
        rows.extend(_point_rows(evaluator, cfg, cache, store))
        store.save()
    rows = mark_safe(rows)
    gaps = np.array([r["gap"] for r in rows])
    return QualityReport(points, len(rows), float(np.median(gaps)), float(np.percentile(gaps, 95)),
                         float(gaps.max()), float((gaps <= 0.02).mean()), float((gaps <= 0.05).mean()),
                         float(np.mean([r["measured"] for r in rows])),
                         float(np.mean([r["safe"] for r in rows])),
                         window, cap, round(time.perf_counter() - start, 1), rows)


def _point_rows(evaluator: Evaluator, cfg: Any, cache: ProgramCache,
                store: BestCache) -> list[dict[str, Any]]:
    """One row per distinct accelerator layer of the point."""
    results, _ = evaluator(cfg)
    chosen = {x.name: x for x in results[0].layers if x.placement == "accel"}
    target, backend = AcceleratorTarget(cfg), make_backend("timing", cfg)
    rows, seen = [], set()
    for step in evaluator.workloads[0].steps_for(cfg.block_in):
        if step.name not in chosen or step.spec is None or is_shallow(step, target):
            continue
        spec = padded(step.spec, evaluator.workloads[0].batch, cfg.batch)
        if spec in seen:
            continue
        seen.add(spec)
        cycles = chosen[step.name].cycles or 0
        op = make_operator(spec, target)
        found = store.get(cfg, op)
        if found is None:
            found = store.put(cfg, op, exhaustive(op, backend, cache, store.window, store.cap))
        best = min(found.best, cycles)
        rows.append({"config": cfg.to_dict(), "layer": step.name, "op": op.op, "spec": repr(spec),
                     "knobs": chosen[step.name].knobs, "chosen": cycles, "best": best,
                     "gap": cycles / best - 1, "measured": found.measured, "low_ratio": found.low_ratio,
                     "pruned_estimate": found.pruned_estimate})
    return rows


def mark_safe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with `safe` set (see the module doc)."""
    low = min(r["low_ratio"] for r in rows)
    return [{**r, "safe": bool(low * r["pruned_estimate"] >= r["best"])} for r in rows]


@dataclass(frozen=True)
class Exhaustive:
    best: int  # the fewest cycles measured
    measured: int
    low_ratio: float  # the smallest cycles / estimate measured
    pruned_estimate: float  # the estimate of the best pruned point (inf: none pruned)
    # (rank by estimate, knobs as JSON, timing cycles) of each measured point that ran
    candidates: tuple[tuple[int, str, int], ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "candidates": [list(c) for c in self.candidates]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Exhaustive:
        return cls(int(data["best"]), int(data["measured"]), float(data["low_ratio"]),
                   float(data["pruned_estimate"]),
                   tuple((int(r), str(k), int(c)) for r, k, c in data["candidates"]))


class BestCache:
    """Exhaustive searches by (config, operator), kept in a JSON file (none: in memory only).  A
    file made with another window or cap is refused: its bests would not be comparable."""

    def __init__(self, path: str | Path | None, window: float = WINDOW, cap: int = CAP) -> None:
        self.path = None if path is None else Path(path)
        self.window, self.cap = window, cap
        self.entries: dict[str, Exhaustive] = {}
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
            window, cap, entries = float(data["window"]), int(data["cap"]), data["entries"]
            self.entries = {key: Exhaustive.from_json(e) for key, e in entries.items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"--best-cache {path}: not a best cache ({exc})") from None
        if (window, cap) != (self.window, self.cap):
            raise InputError(f"--best-cache {path}: made with window {window} and cap {cap}, "
                             f"not {self.window} and {self.cap}")

    @staticmethod
    def key(cfg: Any, op: Any) -> str:
        """The config (with its memory model and clock) and the operator's spec."""
        config = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(f"{config}|{op.op}|{op.spec!r}".encode()).hexdigest()[:24]

    def get(self, cfg: Any, op: Any) -> Exhaustive | None:
        return self.entries.get(self.key(cfg, op))

    def put(self, cfg: Any, op: Any, found: Exhaustive) -> Exhaustive:
        self.entries[self.key(cfg, op)] = found
        return found

    def save(self) -> None:
        """Write the file whole (a killed run leaves the previous one)."""
        if self.path is None:
            return
        data = {"window": self.window, "cap": self.cap,
                "entries": {k: e.to_json() for k, e in sorted(self.entries.items())}}
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(data))
        os.replace(temporary, self.path)


def exhaustive(op: Any, backend: Backend, cache: ProgramCache, window: float = WINDOW,
               cap: int = CAP) -> Exhaustive:
    """The fewest timing cycles over `op`'s points within `window` of its best estimate (at most
    `cap` of them, best estimate first)."""
    points = ranking(op)
    edge = window * points.estimate(0)
    count = min(cap, int(np.searchsorted(points.costs[points.order], edge, side="right")))
    best, low = None, np.inf
    candidates = []
    for i in range(count):
        knobs = points[i]
        try:
            cycles = int(cache.stats(op, knobs, backend).cycles or 0)
        except (ScheduleError, ProgramError, SimulationError):
            continue
        candidates.append((i, json.dumps(knobs.to_json(), sort_keys=True), cycles))
        best = cycles if best is None else min(best, cycles)
        low = min(low, cycles / points.estimate(i))
    assert best is not None, f"{op.op}: no point near its best estimate compiles"
    return Exhaustive(best, count, float(low), points.estimate(count) if count < len(points) else np.inf,
                      tuple(candidates))


__all__ = ["CAP", "WINDOW", "BestCache", "Exhaustive", "QualityReport", "exhaustive", "mark_safe", "quality"]
