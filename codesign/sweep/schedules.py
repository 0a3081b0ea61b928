"""One accelerator operator's schedule chosen for one hardware point: the schedule space ranked
by the compiler's analytical estimate (every point at once, `Conv2d.estimates`), the operator's
default schedule and the best-ranked points compiled and run on the timing model, the best of
them by the layer objective kept.

Compiled streams and their timing runs are shared between points (codesign/sweep/programs.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from codesign.sweep.programs import ProgramCache, compile_key
from codesign.sweep.ranker import Ranker, features
from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dKnobs, DenseKnobs, Eltwise
from compiler.ops.accel.common import best_point
from hw.program import ProgramError
from sim.backend import Backend, SimulationError, Stats

Objective = Callable[[Stats], float]
MEASURED = 3  # candidates measured per operator beyond its default schedule and best estimate
COLD = 2  # more, while the ranker has not seen enough runs
POOL = 24  # the best-estimated points the ranker reorders
# a trained ranker skips points predicted more than 8% slower than the fastest measured: the
# ranker is still off by 5-20% on all of an operator's points on some configs, and at 5% it cut
# the search after the first run on layers whose best it ranked second to fourth (on 20 quality
# points: 96.9% of layers within 5% of their best at 2.9 runs per operator, against 95.6% at 2.5)
MARGIN = 0.08


@dataclass(frozen=True)
class Choice:
    """The schedule kept for one operator: its knobs, the Stats of its Program on the timing
    model, how many candidates were measured, and the default schedule's cycles."""

    knobs: Any
    stats: Stats
    measured: int
    default_cycles: int | None


@dataclass
class Timer:
    """Wall seconds by phase."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, start: float) -> float:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - start
        return now


class Ranking(Sequence[Any]):
    """The fitting points of an operator's space, best estimate first, and its default point
    (None when no point with at most two threads fits); a point's knobs record is made when it
    is read (spaces hold thousands of points, a choice reads a few)."""

    def __init__(self, make: Callable[..., Any], grid: dict[str, np.ndarray], order: np.ndarray,
                 costs: np.ndarray, default: Any | None) -> None:
        self.make, self.grid, self.order, self.costs, self.default = make, grid, order, costs, default

    def __len__(self) -> int:
        return len(self.order)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        g = int(self.order[i])
        return self.make(**{name: int(values[g]) for name, values in self.grid.items()})

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def estimate(self, i: int) -> float:
        """The estimate of the `i`-th point."""
        return float(self.costs[self.order[i]])


def ranking(op: Any) -> Ranking:
    """`op`'s fitting points by estimate (see Ranking)."""
    if isinstance(op, Eltwise):
        points = [p for p in op.points() if op.fits(p)]
        costs = np.array([op.estimate(p) for p in points], dtype=np.float64)
        grid = {name: np.array([getattr(p, name) for p in points], dtype=np.int64)
                for name in type(op.points()[0]).__dataclass_fields__}
        return Ranking(type(points[0]) if points else dict, grid, np.argsort(costs, kind="stable"), costs,
                       _default(op))
    grid, costs = op.estimates()
    fitting = np.flatnonzero(~np.isnan(costs))
    order = fitting[np.argsort(costs[fitting], kind="stable")]
    make = Conv2dKnobs if isinstance(op, Conv2d) else DenseKnobs
    threads = np.prod([v for n, v in grid.items() if n.endswith("_threads")], axis=0)
    try:  # op.default_knobs()'s point, from the estimates computed here
        default = best_point(make, grid, costs, threads, None)
    except ScheduleError:
        default = None
    return Ranking(make, grid, order, costs, default)


def _default(op: Any) -> Any | None:
    try:
        return op.default_knobs()
    except ScheduleError:
        return None


def choose(op: Any, backend: Backend, objective: Objective, cache: ProgramCache, timer: Timer,
           measured: int = MEASURED, ranker: Ranker | None = None) -> Choice | None:
    """The best under `objective` of `op`'s default schedule, its best-estimated point and up to
    `measured` more: the best of its POOL best-estimated points by `ranker`'s corrected estimate
    (by the estimate alone without a ranker, and `COLD` more while the ranker is not trained), each
    run on `backend` (the timing model); once trained, a point predicted slower than the fastest
    measured so far by more than MARGIN is not run (nor, in the ranker's order, those after
    it).  The ranker learns from every run.  Points that fail to compile are skipped and the
    next taken, so an operator with any compiling point gets one.  None when none compiles."""
    start = time.perf_counter()
    points = ranking(op)
    pool, x, predicted = _pool(op, points, ranker)
    trained = ranker is not None and ranker.trained
    want = measured + (COLD if ranker is not None and not trained else 0)
    start = timer.add("search", start)
    best: tuple[float, int, Any, Stats] | None = None
    default_cycles, tried, fastest = None, 0, np.inf
    head, queue = _queue(points, pool)
    for knobs, i in queue:
        if tried >= head + want or (trained and tried >= head and i is not None and i < len(predicted)
                                    and predicted[i] > np.log(fastest) + MARGIN):
            break
        stats, start = _measure(op, knobs, backend, cache, timer, start)
        if stats is None:
            continue
        tried += 1
        assert stats.cycles is not None, "the timing model counts cycles"
        fastest = min(fastest, stats.cycles)
        if ranker is not None and x is not None and i is not None and i < len(x):
            ranker.observe(x[i], points.estimate(i), stats.cycles)
        if knobs == points.default:
            default_cycles = stats.cycles
        score = (objective(stats), stats.cycles)
        if best is None or score < best[:2]:
            best = (*score, knobs, stats)  # type: ignore[assignment]
    if best is None:
        return None
    return Choice(best[2], best[3], tried, default_cycles)


def _pool(op: Any, points: Ranking, ranker: Ranker | None) -> tuple[list[int], np.ndarray | None, np.ndarray]:
    """The first POOL points by estimate (their ranks), in the ranker's order; their features
    and their predicted log cycles (the estimate's without a ranker)."""
    top = list(range(min(POOL, len(points))))
    logs = np.log(points.costs[points.order[: len(top)]])
    x = features(op, points.grid, points.order[: len(top)]) if ranker is not None and top else None
    if x is None or ranker is None:
        return top, None, logs
    predicted = logs + ranker.correction(x)
    return [int(i) for i in np.argsort(predicted, kind="stable")], x, predicted


def _queue(points: Ranking, pool: list[int]) -> tuple[int, Iterator[tuple[Any, int | None]]]:
    """(how many head points, (knobs, rank by estimate or None) in measuring order): the head is
    the default and the best estimate, then come the pool and the rest by estimate; each point
    once."""
    default = points.default
    head = [(default, 0 if len(points) and default == points[0] else None)] if default is not None else []
    if len(points) and default != points[0]:
        head.append((points[0], 0))
    ranks = itertools.chain(pool, range(len(pool), len(points)))

    def run() -> Iterator[tuple[Any, int | None]]:
        seen: set[Any] = set()
        for knobs, i in itertools.chain(head, ((points[i], i) for i in ranks)):
            if knobs not in seen:
                seen.add(knobs)
                yield knobs, i

    return len(head), run()


def _measure(op: Any, knobs: Any, backend: Backend, cache: ProgramCache, timer: Timer,
             start: float) -> tuple[Stats | None, float]:
    """The Stats of `knobs` on `backend` (None when it does not compile or run), and the time."""
    try:
        stream = cache.stream(op, knobs)
        stats = cache.known(stream, backend)
        if stats is not None:
            return stats, timer.add("compile", start)
        program = cache.encode(stream, op.target.cfg)
    except (ScheduleError, ProgramError):
        return None, timer.add("compile", start)
    start = timer.add("compile", start)
    try:
        stats = cache.run(stream, program, backend)
    except SimulationError:
        stats = None
    return stats, timer.add("timing", start)


__all__ = ["MEASURED", "Choice", "Objective", "ProgramCache", "Ranking", "Timer", "choose", "compile_key",
           "ranking"]
