"""The real evaluation of a point, assembled from the evaluator and the PPA models.

`make_evaluate(space)` is called once in the coordinator, before the pool forks (or the
evaluation is shipped to Dask workers): it prepares the `Evaluator` (each workload quantized
once per sweep, not per point; the schedule ranker's prior learned once on `calibration_configs`,
a fixed draw of the space's points), and returns the function a worker runs per point.
`make_area()` is the area model that checks a space's max_area_mm2.  The modules are imported
here, inside the functions, so the engine and its tests never need them.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
from collections.abc import Callable
from typing import Any

from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space
from hw.config import AcceleratorConfig
from sim.backend import Stats


class Evaluation:
    """The evaluation of a sweep's points (`evaluation(point)`, in pool workers) and the RTL
    confirmation of its best designs (`evaluation.confirm(point, result)`), both with one
    `Evaluator`: each workload quantized once per sweep, the layers' schedules chosen alike."""

    def __init__(self, space: Space) -> None:
        from codesign.sweep.evaluate import Evaluator

        self.evaluator = Evaluator(space.workloads, layer_objective=space.layer_objective,
                                   batch_policy=space.batch_policy, energy_of=_energy_of(space),
                                   calibration=calibration_configs(space))

    def __call__(self, point: Point) -> PointResult:
        from codesign.sweep.metrics import point_metrics

        results, wall_s = self.evaluator(point.config)
        start = time.monotonic()
        metrics, fidelity = point_metrics(point.config, results)
        wall_s = {**wall_s, "metrics": time.monotonic() - start}
        return PointResult(point.id, tuple(results), metrics, fidelity, wall_s)

    def confirm(self, point: Point, swept: PointResult | None) -> list[dict[str, Any]]:
        """`point`'s workloads run whole on fsim, the timing model and the RTL
        (codesign/sweep/confirm.py), as JSON."""
        from codesign.sweep.confirm import confirm

        cfg = point.config
        found = confirm(cfg, point.id, self.evaluator.workloads, self.evaluator.objective(cfg), swept,
                        measured=self.evaluator.measured)
        return [c.to_json() for c in found]


def make_evaluate(space: Space) -> Evaluation:
    """Evaluate a point of `space`: compile and time every workload with schedules chosen for
    its hardware, then combine them with area and energy into the objectives' metrics."""
    return Evaluation(space)


def calibration_configs(space: Space, count: int | None = None, seed: int = 0) -> list[AcceleratorConfig]:
    """Up to `count` (default CALIBRATION_POINTS) feasible points of `space`, drawn with a fixed
    `seed` whatever the sweep's: the configs the ranker's prior is learned on, so that a point's
    result depends on the space and the point only.  Drawn from the combinations directly (a
    space of 10^5 need not be scanned whole first); the area budget is not checked (with or
    without an area model, the same configs)."""
    from codesign.sweep.evaluate import CALIBRATION_POINTS

    count = CALIBRATION_POINTS if count is None else count
    budgets = dataclasses.replace(space.constraints, max_area_mm2=None)
    rng = random.Random(seed)
    found: list[AcceleratorConfig] = []
    for index in rng.sample(range(space.size), min(space.size, 50 * count)):
        point = space.point_at(index)
        if point is not None and budgets.violation(point.config, None) is None:
            found.append(point.config)
            if len(found) == count:
                break
    return found


def _energy_of(space: Space) -> Callable[[Stats, AcceleratorConfig], float] | None:
    """The energy model in picojoules per run, for a space whose layers' schedules are chosen
    by energy or EDP (None when they are chosen by cycles)."""
    if space.layer_objective == "cycles":
        return None
    from codesign.ppa.energy import energy_model

    def energy_pj(stats: Stats, cfg: AcceleratorConfig) -> float:
        return float(energy_model(stats, cfg).total_pj)

    return energy_pj


def make_proxy(evaluation: Any, space: Space) -> Callable[[AcceleratorConfig], dict[str, float]] | None:
    """The compiler's cheap estimates of a point's latency and energy (codesign/sweep/proxy.py),
    from the workloads an `Evaluation` prepared, for a model-guided strategy (None for an
    evaluation without them, such as a stand-in)."""
    from codesign.sweep.proxy import Proxy

    evaluator = getattr(evaluation, "evaluator", None)
    return None if evaluator is None else Proxy(evaluator.workloads, space.batch_policy)


def make_area() -> Callable[[AcceleratorConfig], float]:
    """The analytical area model, mm2 of a config, remembered per config: a sweep asks it of
    every combination when it checks max_area_mm2 and again of every feasible point when a
    strategy takes it as a known metric (~1 ms each: 10^4-point spaces pay it once)."""
    from codesign.ppa.area import area_model

    @functools.cache
    def area_mm2(cfg: AcceleratorConfig) -> float:
        return float(area_model(cfg).total_mm2)

    return area_mm2


__all__ = ["calibration_configs", "make_area", "make_evaluate", "make_proxy"]
