"""The sweep engine: ask a strategy for points, evaluate them in a process pool, store each result.

`run_sweep` is the loop: the coordinator (this process) asks the strategy for a batch, records
the infeasible points (a constraint broken) without evaluating them, runs the rest on an
executor (codesign/sweep/executor/: the local pool of forked workers with a time limit per
point, or Dask workers), and stores every outcome as it arrives.  An evaluation that raises,
kills its worker (a segfault in a native library) or hangs past `timeout_s` is stored as
'error', 'crash' or 'timeout' with its reason; the pool replaces the worker and the sweep goes
on (a crash is retried once in a fresh worker, then kept; Dask retries it itself and says how
often, `Done.attempts`).  With `resume`, the store's points are told to the strategy first and
never evaluated again, so a killed sweep continues where its last commit left it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.sweep.executor import Done, Evaluation, Executor, ExecutorSpec, open_executor
from codesign.sweep.pareto import non_dominated
from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space, SpaceError
from codesign.sweep.store import FAILED, STATUSES, SweepStore
from codesign.sweep.strategy import DEFAULT_STRATEGY, Failure, Known, Outcome, Strategy, make_strategy
from hw.config import AcceleratorConfig
from hw.errors import InputError

Evaluate = Callable[[Point], PointResult]
Progress = Callable[[int, int, str], None]  # (done, total, note)
CRASH_ATTEMPTS = 2  # a crashed point is tried once more in a fresh worker


@dataclass(frozen=True)
class FrontPoint:
    id: str
    metrics: dict[str, float]
    config: dict[str, Any]


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: points by status (the store's, earlier runs included), how many this run
    evaluated, and the Pareto front of the objectives over every 'ok' point."""

    store: str
    space: str
    strategy: str
    seed: int
    objectives: tuple[str, ...]
    by_status: dict[str, int]
    evaluated_now: int
    wall_s: float
    front: tuple[FrontPoint, ...]

    @property
    def evaluated(self) -> int:
        return sum(n for status, n in self.by_status.items() if status != "infeasible")

    @property
    def failures(self) -> int:
        return sum(self.by_status[s] for s in FAILED)

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "space": self.space, "strategy": self.strategy, "seed": self.seed,
                "points_evaluated": self.evaluated, "evaluated_now": self.evaluated_now,
                "ok": self.by_status["ok"], "failures": {s: self.by_status[s] for s in FAILED},
                "infeasible": self.by_status["infeasible"], "wall_s": round(self.wall_s, 3),
                "objectives": list(self.objectives),
                "pareto": [{"id": p.id, **{m: p.metrics.get(m) for m in self.objectives}}
                           for p in self.front]}


def run_sweep(space: Space, store: str | Path, evaluate: Evaluate, *, strategy: str = DEFAULT_STRATEGY,
              budget: int | None = None, workers: int | None = None, timeout_s: float = 600.0,
              resume: bool = False, seed: int = 0, progress: Progress | None = None,
              batch: int | None = None, known: Known | None = None,
              proxy: Known | None = None,
              executor: ExecutorSpec | str | Executor = "local") -> SweepSummary:
    """Evaluate up to `budget` points of `space` (all its feasible points when None; points stored
    by an earlier run count) with `evaluate` in `workers` processes (default the core count; 0:
    in this process, with no time limit), storing each outcome in the store at `store`.
    `known` gives metrics exact before a point runs (the area model's), `proxy` cheap estimates
    of others (codesign/sweep/proxy.py), both for the strategy.
    `executor`: where points run ('local', 'dask', 'dask://HOST:PORT': codesign/sweep/executor/),
    or an executor already open (running `evaluate`; the caller closes it); this process alone
    writes the store, whichever it is."""
    workers = (os.cpu_count() or 1) if workers is None else workers
    check_options(budget, workers, timeout_s, batch)
    start = time.monotonic()
    search = make_strategy(strategy, space, seed, known=known, proxy=proxy)
    with SweepStore.open(store, space, strategy=strategy, seed=seed, resume=resume) as db:
        evaluated = _replay(db, search)
        loop = _Loop(space, db, search, progress, _total(space, budget), evaluated)
        with contextlib.ExitStack() as opened:
            pool = executor if not isinstance(executor, str | ExecutorSpec) else opened.enter_context(
                contextlib.closing(open_executor(executor, Evaluation(evaluate), workers=workers,
                                                 timeout_s=timeout_s)))
            loop.run(pool, budget, batch or max(8 * pool.slots, 16))
        db.flush()
        loop.finish()
        if loop.evaluated == 0:
            raise SpaceError(f"{space.path}: the space has no feasible point ({_census(space)})")
        return summarise(db, space, strategy=strategy, seed=seed, evaluated_now=loop.evaluated_now,
                         wall_s=time.monotonic() - start)


def check_options(budget: int | None, workers: int, timeout_s: float, batch: int | None) -> None:
    if budget is not None and budget < 1:
        raise InputError(f"--budget must be at least 1, not {budget}")
    if workers < 0:
        raise InputError(f"--workers must be at least 0, not {workers}")
    if not timeout_s > 0:
        raise InputError(f"--timeout must be positive, not {timeout_s}")
    if batch is not None and batch < 1:
        raise InputError(f"batch must be at least 1, not {batch}")


def _census(space: Space) -> str:
    return ", ".join(f"{k} {v}" for k, v in space.census().items())


def _total(space: Space, budget: int | None) -> int:
    """The progress bar's total: the budget, or every feasible point (counting them needs every
    combination checked: seconds for 10^4 points)."""
    return budget if budget is not None else len(space)


def _replay(db: SweepStore, search: Strategy) -> int:
    """Tell the strategy every stored point, in order; the number evaluated (not infeasible)."""
    evaluated = 0
    for row in db.points():
        point = Point(AcceleratorConfig.from_dict(row.config))
        outcome: Outcome = row.result if row.result is not None else Failure(row.status, row.reason or "")
        search.tell(point, outcome)
        evaluated += row.status != "infeasible"
    return evaluated


class _Loop:
    """One sweep's ask / evaluate / store / tell loop and its progress counters."""

    def __init__(self, space: Space, db: SweepStore, search: Strategy, progress: Progress | None,
                 total: int, evaluated: int) -> None:
        self.space, self.db, self.search, self.progress, self.total = space, db, search, progress, total
        self.evaluated, self.evaluated_now = evaluated, 0
        self.failures = sum(db.counts()[s] for s in FAILED)
        self.stored = db.ids()
        self.best: float | None = _best(db, space)
        self.start = time.monotonic()

    def run(self, pool: Executor, budget: int | None, batch: int) -> None:
        while budget is None or self.evaluated < budget:
            want = batch if budget is None else min(batch, budget - self.evaluated)
            asked = [p for p in self.search.ask(want) if p.id not in self.stored]
            if not asked:
                return
            runnable = [p for p in asked if not self._infeasible(p)]
            retry = self._evaluate(pool, runnable, attempt=1)
            if retry:
                self._evaluate(pool, retry, attempt=CRASH_ATTEMPTS)
            self.db.flush()

    def _infeasible(self, point: Point) -> bool:
        reason = self.space.violation(point)
        if reason is not None:
            self.db.record(point, "infeasible", reason=reason)
            self.stored.add(point.id)
            self.search.tell(point, Failure("infeasible", reason))
        return reason is not None

    def _evaluate(self, pool: Executor, points: Sequence[Point], attempt: int) -> list[Point]:
        """Run `points`, storing each outcome; the crashed ones to try again (first attempt)."""
        retry = []
        for index, done in pool.run(points):
            point = points[index]
            if done.status == "crash" and attempt < CRASH_ATTEMPTS and done.attempts is None:
                retry.append(point)
                continue
            wall_s = done.wall_s if done.wall_s is not None else (
                pool.timeout_s if done.status == "timeout" else None)
            self.db.record(point, done.status, result=done.result, reason=done.reason,
                           attempts=done.attempts or attempt, wall_s=wall_s)
            self.stored.add(point.id)
            self.search.tell(point, done.result if done.result is not None
                             else Failure(done.status, done.reason or ""))
            self._count(done)
        return retry

    def _count(self, done: Done) -> None:
        self.evaluated += 1
        self.evaluated_now += 1
        if done.status in FAILED:
            self.failures += 1
        if done.result is not None and self.space.metrics:
            value = done.result.metrics.get(self.space.metrics[0])
            if value is not None and (self.best is None or value < self.best):
                self.best = value
        if self.progress is not None:
            self.progress(min(self.evaluated, self.total), self.total, self._note())

    def finish(self) -> None:
        """End the progress bar where the sweep ended (short of its total when the space ran out)."""
        if self.progress is not None and self.evaluated < self.total:
            self.progress(self.evaluated, self.evaluated, self._note())

    def _note(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.evaluated_now / elapsed if elapsed > 0 else 0.0
        left = max(self.total - self.evaluated, 0)
        eta = f"{left / rate:.0f}s" if rate > 0 else "?"
        best = f"{self.best:.4g}" if self.best is not None else "-"
        return (f"failed {self.failures}  best {self.space.metrics[0] if self.space.metrics else ''} {best}  "
                f"{rate:.2f} pt/s  ETA {eta}")


def _best(db: SweepStore, space: Space) -> float | None:
    if not space.metrics:
        return None
    values = [row.metrics.get(space.metrics[0]) for row in db.points("ok")]
    found = [v for v in values if v is not None]
    return min(found) if found else None


def pareto_front(db: SweepStore, metrics: Sequence[str]) -> list[FrontPoint]:
    """The stored 'ok' points no other dominates in `metrics` (those lacking one are left out),
    in the order they finished."""
    rows = [r for r in db.points("ok") if all(r.metrics.get(m) is not None for m in metrics)]
    if not rows:
        return []
    values = np.array([[r.metrics[m] for m in metrics] for r in rows], dtype=float)
    mask = non_dominated(values)
    return [FrontPoint(r.id, {m: r.metrics[m] for m in metrics}, r.config)
            for r, keep in zip(rows, mask, strict=True) if keep]


def summarise(db: SweepStore, space: Space, *, strategy: str, seed: int, evaluated_now: int = 0,
              wall_s: float = 0.0) -> SweepSummary:
    counts = db.counts()
    return SweepSummary(store=str(db.path), space=space.name, strategy=strategy, seed=seed,
                        objectives=space.metrics, by_status={s: counts[s] for s in STATUSES},
                        evaluated_now=evaluated_now, wall_s=wall_s,
                        front=tuple(pareto_front(db, space.metrics)))


__all__ = ["Evaluate", "FrontPoint", "Progress", "SweepSummary", "check_options", "pareto_front", "run_sweep",
           "summarise"]
