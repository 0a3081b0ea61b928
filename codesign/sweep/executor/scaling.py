"""A model of a Dask sweep's throughput against its worker count, fitted to what
`codesign bench sweep --executor dask --overhead` measured on one machine.

Per worker, a task of k points costs k x `point_s` (the evaluation, measured) plus
`task_overhead_s` (one task's round trip: the worker idles for it, one task at a time); the
engine asks 8 points per worker and waits for the batch, so a batch's last round loses about
half a point per worker (`1 + 1/(2 x rounds)`).  The scheduler caps the whole cluster at
`scheduler_tasks_per_s` tasks per second, so k points per task at most k times that.  A sweep
also pays once: the cluster's start, the evaluation shipped to each worker
(`ship_s_per_worker`, through the scheduler, one worker after another) and the cold start of each
worker's program cache and ranker (`cold_s`, in parallel on every worker):

    rate(W)    = min(W / ((point_s + task_overhead_s / k) (1 + 1 / (2 rounds))), scheduler_tasks_per_s k)
    wall(N, W) = startup_s + W ship_s_per_worker + cold_s + N / rate(W)

`limits()` says where it stops holding.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from hw.errors import InputError

ROUNDS = 8  # the engine asks 8 points per worker and waits for them all (engine.run_sweep)
TASK_S = 0.5  # the Dask executor batches points until a task takes about this long


@dataclass(frozen=True)
class ScalingModel:
    point_s: float  # seconds one worker takes per point (steady)
    task_overhead_s: float  # a task's round trip beside its work
    scheduler_tasks_per_s: float  # the scheduler's rate with every worker busy
    startup_s: float = 0.0  # the cluster's start (a LocalCluster's, or 0 for a running one)
    ship_s_per_worker: float = 0.0  # the evaluation to one worker
    cold_s: float = 0.0  # a worker's extra seconds while its caches are cold
    rounds: int = ROUNDS

    def __post_init__(self) -> None:
        for name in ("point_s", "task_overhead_s", "scheduler_tasks_per_s"):
            if not getattr(self, name) > 0:
                raise InputError(f"the scaling model's {name} must be positive, not {getattr(self, name)}")

    @property
    def points_per_task(self) -> int:
        """As the executor batches: enough points for a task of TASK_S seconds."""
        return max(1, math.ceil(TASK_S / self.point_s))

    def worker_points_per_s(self) -> float:
        k = self.points_per_task
        return 1.0 / ((self.point_s + self.task_overhead_s / k) * (1 + 1 / (2 * self.rounds)))

    def points_per_s(self, workers: int) -> float:
        """The cluster's steady rate with `workers` one-thread workers."""
        return min(workers * self.worker_points_per_s(), self.scheduler_tasks_per_s * self.points_per_task)

    @property
    def saturating_workers(self) -> int:
        """Beyond this many workers the scheduler, not the workers, sets the rate."""
        return math.floor(self.scheduler_tasks_per_s * self.points_per_task / self.worker_points_per_s())

    def wall_s(self, points: int, workers: int) -> float:
        fixed = self.startup_s + workers * self.ship_s_per_worker + self.cold_s
        return fixed + points / self.points_per_s(workers)

    def workers_for(self, points: int, within_s: float) -> int | None:
        """The fewest workers that finish `points` within `within_s` (None: none can)."""
        for workers in range(1, self.saturating_workers + 2):
            if self.wall_s(points, workers) <= within_s:
                return workers
        return None

    def limits(self) -> list[str]:
        """Where the model stops holding, with this fit's numbers."""
        k = self.points_per_task
        return [
            "one worker per core: measured on a 2-core machine, so W > 2 is extrapolated; each worker "
            "needs its own core and about the evaluation's memory",
            f"the scheduler's {self.scheduler_tasks_per_s:g} tasks/s (measured on loopback) caps the "
            f"cluster at {self.scheduler_tasks_per_s * k:g} points/s: beyond {self.saturating_workers} "
            "workers more do not help (a faster evaluation saturates it sooner)",
            f"a task's round trip ({self.task_overhead_s * 1e3:.1f} ms here) grows on a real network; it "
            f"matters only while it is not small against {k} x {self.point_s:g} s per task",
            f"shipping the evaluation ({self.ship_s_per_worker:.2f} s per worker here) goes through the "
            "scheduler's link one worker after another (a LocalCluster's workers inherit it instead); "
            "over a 1 Gb/s link the 80 MB ResNet-18 evaluation of `small` takes ~0.7 s per worker",
            "one client asks the strategy and writes the store: grid and random ask in microseconds and "
            "the store takes 35k rows/s, but a model-guided strategy's ask (surrogate, NSGA-II) grows "
            "with the points told and is not modelled",
            "points of a real space differ in cost: the rate is for the measured mix; the batch barrier "
            f"(the engine waits for {self.rounds} points per worker) loses more when costs vary more",
        ]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def fit(bench: dict[str, Any]) -> ScalingModel:
    """The model from one `codesign bench sweep --executor dask --overhead --json` result:
    seconds per point per worker from its sweep, the overheads from its probe, the start and the
    shipping from its probe (the evaluation pickled and sent to every worker, as a running
    scheduler's get it; a LocalCluster's workers inherit it), else from its executor's start."""
    overhead = bench.get("overhead")
    ship_s = overhead.get("ship_s") if overhead else None
    ship_s = bench.get("ship_s") if ship_s is None else ship_s
    if not overhead or ship_s is None:
        raise InputError("the scaling model needs a `codesign bench sweep --executor dask --overhead` result")
    workers = max(int(bench["slots"]), 1)
    return ScalingModel(point_s=float(bench["s_per_point_per_slot"]),
                        task_overhead_s=float(overhead["task_round_trip_ms"]) / 1e3,
                        scheduler_tasks_per_s=float(overhead["tasks_per_s"]),
                        startup_s=float(bench["connect_s"]),
                        ship_s_per_worker=float(ship_s) / workers)


def predict(model: ScalingModel, points: int = 100_000, within_s: float = 3600.0,
            workers: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)) -> dict[str, Any]:
    """The figures the README quotes: the rate by worker count, and the workers `points` need."""
    return {"model": model.to_json(), "points_per_task": model.points_per_task,
            "points_per_s": {str(w): round(model.points_per_s(w), 3) for w in workers},
            "saturating_workers": model.saturating_workers, "points": points, "within_s": within_s,
            "workers_needed": model.workers_for(points, within_s), "limits": model.limits()}


__all__ = ["ROUNDS", "TASK_S", "ScalingModel", "fit", "predict"]
