"""One accelerator operator's schedule chosen for one hardware point: the schedule space ranked
by the compiler's analytical estimate (every point at once, `Conv2d.estimates`), the operator's
default schedule and the best-ranked points compiled and run on the timing model, the best of
them by the layer objective kept.

Compiled streams and their timing runs are shared between points (codesign/sweep/programs.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from codesign.sweep.programs import ProgramCache, compile_key
from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dKnobs, DenseKnobs, Eltwise
from hw.program import ProgramError
from sim.backend import Backend, SimulationError, Stats

Objective = Callable[[Stats], float]
MEASURED = 3  # candidates measured per operator beyond its default schedule


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
    scored = np.where((threads <= 2) & ~np.isnan(costs), costs, np.inf)
    default = None
    if np.isfinite(scored).any():  # op.default_knobs()'s point (compiler.ops.accel.common.best_point)
        i = int(np.argmin(scored))
        default = make(**{name: int(values[i]) for name, values in grid.items()})
    return Ranking(make, grid, order, costs, default)


def ranked(op: Any) -> tuple[Ranking, Any | None]:
    """The fitting points of `op`'s space, best estimate first, and its default point."""
    r = ranking(op)
    return r, r.default


def _default(op: Any) -> Any | None:
    try:
        return op.default_knobs()
    except ScheduleError:
        return None


def choose(op: Any, backend: Backend, objective: Objective, cache: ProgramCache, timer: Timer,
           measured: int = MEASURED) -> Choice | None:
    """The best of `op`'s default schedule and its `measured` best-estimated points under
    `objective`, each run on `backend` (the timing model); points that fail to compile are
    skipped and the next in estimate order taken, so an operator with any compiling point gets
    one.  None when no point of the space compiles."""
    start = time.perf_counter()
    points = ranking(op)
    default = points.default
    start = timer.add("search", start)
    queue = ([default] if default is not None else []) + [p for p in points if p != default]
    best: tuple[float, int, Any, Stats] | None = None
    default_cycles, tried = None, 0
    for knobs in queue:
        if tried >= measured + (default is not None):
            break
        stats, start = _measure(op, knobs, backend, cache, timer, start)
        if stats is None:
            continue
        tried += 1
        assert stats.cycles is not None, "the timing model counts cycles"
        if knobs == default:
            default_cycles = stats.cycles
        score = (objective(stats), stats.cycles)
        if best is None or score < best[:2]:
            best = (*score, knobs, stats)  # type: ignore[assignment]
    if best is None:
        return None
    return Choice(best[2], best[3], tried, default_cycles)


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
           "ranked", "ranking"]
