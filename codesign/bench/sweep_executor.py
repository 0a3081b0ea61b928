"""`codesign bench sweep --executor local|dask|dask://HOST:PORT --workers N`: a sweep's throughput
on one executor, and what Dask costs beside the evaluations.

`run` prepares the space's workloads once, opens the executor (timed: a LocalCluster's start and
shipping the evaluation to each worker), runs `budget` points of a seeded random sweep through
the engine (the real store, written by this process), and reports points per second with and
without that start.  With `against`, the store is compared with another run's (the same points?
the same metrics?).  For Dask, `overhead` also measures, on the same cluster with an evaluation
that does nothing: one task's round trip, one at a time (latency), and tasks per second with
every worker busy (the scheduler's rate), and the evaluation pickled and sent to every worker as
it is to a running scheduler's (a LocalCluster's workers fork from this process and inherit it):
the inputs of `codesign.sweep.executor.scaling`, whose fit and prediction (workers for 100,000
points in an hour) the JSON then carries as `scaling`.

Run local and dask back to back and more than once: other work on the machine moves timings.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codesign.sweep import pipeline
from codesign.sweep.engine import run_sweep
from codesign.sweep.executor import Evaluation, Executor, ExecutorSpec, check_workers, open_executor
from codesign.sweep.executor.scaling import fit, predict
from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space
from codesign.sweep.store import SweepStore


@dataclass(frozen=True)
class Comparison:
    """This run's store against another's: points in both, statuses equal, metrics identical,
    and the largest relative difference of an objective where they are not."""

    points: int
    other_points: int
    same_points: bool
    same_status: int
    identical_metrics: int
    max_relative_difference: float


@dataclass(frozen=True)
class Overhead:
    """Dask's own costs, measured with an evaluation that does nothing; and the sweep's evaluation
    pickled and registered on every worker, as for a running scheduler (`ship_s`, `shipped_mb`)."""

    task_round_trip_ms: float
    tasks_per_s: float
    tasks: int
    ship_s: float | None = None
    shipped_mb: float | None = None


@dataclass(frozen=True)
class SweepBench:
    executor: str
    workers: int
    slots: int
    space: str
    seed: int
    budget: int
    points: int
    prepare_s: float
    startup_s: float
    sweep_s: float
    close_s: float
    points_per_s: float
    points_per_s_steady: float
    s_per_point_per_slot: float
    tasks: int | None = None
    connect_s: float | None = None
    ship_s: float | None = None
    shipped_mb: float | None = None
    overhead: Overhead | None = None
    against: Comparison | None = None
    store: str = ""
    by_status: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.overhead is not None:  # the scaling model fitted to this run
            data["scaling"] = predict(fit(data))
        return data


def run(space: Space, store: str | Path, spec: ExecutorSpec, *, workers: int, budget: int, seed: int = 0,
        against: str | Path | None = None, overhead: bool = False) -> SweepBench:
    check_workers(spec, workers)
    start = time.monotonic()
    evaluate = pipeline.make_evaluate(space)
    prepare_s = time.monotonic() - start
    start = time.monotonic()
    evaluation = Evaluation(evaluate)
    executor = open_executor(spec, evaluation, workers=workers, timeout_s=600.0)
    startup_s = time.monotonic() - start
    try:
        start = time.monotonic()
        summary = run_sweep(space, store, evaluate, strategy="random", budget=budget, workers=workers,
                            seed=seed, executor=executor)
        sweep_s = time.monotonic() - start
        measured = _overhead(executor, space, evaluation) if overhead and spec.kind == "dask" else None
    finally:
        start = time.monotonic()
        executor.close()
        close_s = time.monotonic() - start
    points = summary.evaluated_now
    return SweepBench(
        executor=spec.describe(), workers=workers, slots=executor.slots, space=space.name, seed=seed,
        budget=budget, points=points, prepare_s=round(prepare_s, 2), startup_s=round(startup_s, 2),
        sweep_s=round(sweep_s, 2), close_s=round(close_s, 2),
        points_per_s=round(points / (startup_s + sweep_s), 4), points_per_s_steady=round(points / sweep_s, 4),
        s_per_point_per_slot=round(sweep_s * executor.slots / max(points, 1), 3),
        tasks=getattr(executor, "tasks", None), connect_s=_rounded(executor, "connect_s"),
        ship_s=_rounded(executor, "ship_s"),
        shipped_mb=round(executor.blob_bytes / 1e6, 1) if hasattr(executor, "blob_bytes") else None,
        overhead=measured, against=compare(store, against) if against is not None else None,
        store=str(store), by_status=summary.by_status)


def _rounded(executor: Executor, name: str) -> float | None:
    value = getattr(executor, name, None)
    return round(value, 3) if value is not None else None


def echo(point: Point) -> PointResult:
    """An evaluation that does nothing: what a task costs beside its work."""
    return PointResult(point.id, (), {}, {})


def _overhead(executor: Executor, space: Space, evaluation: Evaluation, tasks: int = 400, trips: int = 20
              ) -> Overhead:
    """Round trips one at a time, then `tasks` one-point tasks at once, on the sweep's cluster;
    then `evaluation` shipped to its workers as to a running scheduler's."""
    from codesign.sweep.executor.distributed import DaskExecutor

    assert isinstance(executor, DaskExecutor)
    spec = ExecutorSpec("dask", executor.client.scheduler.address.split("://", 1)[1],
                        executor.spec.security)
    points = [p for _, p in zip(range(tasks), _cycle(space), strict=False)]
    with contextlib.closing(DaskExecutor(Evaluation(echo), spec, points_per_task=1)) as probe:
        list(probe.run(points[:1]))  # the first task unpickles the evaluation
        start = time.monotonic()
        for point in points[:trips]:
            list(probe.run([point]))
        trip_s = (time.monotonic() - start) / trips
        start = time.monotonic()
        list(probe.run(points))
        rate = tasks / (time.monotonic() - start)
    with contextlib.closing(DaskExecutor(evaluation, spec)) as shipped:
        ship_s, shipped_mb = shipped.ship_s, shipped.blob_bytes / 1e6
    return Overhead(round(trip_s * 1e3, 2), round(rate, 1), tasks, round(ship_s, 3), round(shipped_mb, 1))


def _cycle(space: Space) -> Any:
    while True:
        yield from (space.point_at(i) or Point(space.base) for i in range(space.size))


def compare(store: str | Path, other: str | Path) -> Comparison:
    mine, theirs = _rows(store), _rows(other)
    both = set(mine) & set(theirs)
    same_status = sum(mine[i][0] == theirs[i][0] for i in both)
    identical = sum(mine[i] == theirs[i] for i in both)
    worst = 0.0
    for i in both:
        for name, value in mine[i][1].items():
            there = theirs[i][1].get(name)
            if there is not None and value != there:
                worst = max(worst, abs(value - there) / max(abs(value), abs(there)))
    return Comparison(len(mine), len(theirs), set(mine) == set(theirs), same_status, identical,
                      round(worst, 6))


def _rows(path: str | Path) -> dict[str, tuple[str, dict[str, float]]]:
    with SweepStore.read(path) as db:
        return {r.id: (r.status, r.metrics) for r in db.points()}


__all__ = ["Comparison", "Overhead", "SweepBench", "compare", "echo", "run"]
