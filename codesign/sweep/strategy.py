"""Search strategies: which points a sweep evaluates next.

A strategy is an ask/tell object over a `Space`: `ask(n)` gives up to n points it has neither
given nor been told about ([] when it has nothing more), and `tell(point, outcome)` reports a
point's `PointResult` or `Failure` (an infeasible point is a Failure too).  The engine tells a
resumed strategy every stored point first, in the order they finished, so a strategy rebuilt from
the store continues where it stopped; given the same seed and the same tells, a strategy asks the
same points.  An adaptive strategy (NSGA-II, a surrogate) reads the metrics it minimises from
`space.metrics` and works on `space.coordinates(point)` / `space.point_with(coords)`.

`known`, when given, computes metrics that are cheap and exact before a point runs (the area
model's `area_mm2`): a model-guided strategy uses them as they are instead of predicting them.
`proxy`, when given, computes cheap *estimates* of metrics before a point runs (the compiler's
analytical estimates, codesign/sweep/proxy.py): a model-guided strategy starts from them and
learns what they miss; the others ignore both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space
from hw.config import AcceleratorConfig
from hw.errors import InputError


@dataclass(frozen=True)
class Failure:
    """A point with no result: status 'infeasible', 'error', 'timeout' or 'crash', and why."""

    status: str
    reason: str


Outcome = PointResult | Failure
Known = Callable[[AcceleratorConfig], dict[str, float]]  # metrics known exactly before evaluation


class Strategy(Protocol):
    name: str

    def ask(self, n: int) -> list[Point]: ...

    def tell(self, point: Point, outcome: Outcome) -> None: ...


class _Ordered:
    """Asks the space's valid combinations in a fixed order, skipping those already told."""

    name = "ordered"

    def __init__(self, space: Space, order: Iterator[int]) -> None:
        self.space, self.order = space, order
        self.seen: set[str] = set()

    def ask(self, n: int) -> list[Point]:
        points: list[Point] = []
        for index in self.order:
            point = self.space.point_at(index)
            if point is None or point.id in self.seen:
                continue
            self.seen.add(point.id)
            points.append(point)
            if len(points) >= n:
                break
        return points

    def tell(self, point: Point, outcome: Outcome) -> None:
        self.seen.add(point.id)


class GridStrategy(_Ordered):
    """Every combination in enumeration order (the last dimension fastest)."""

    name = "grid"

    def __init__(self, space: Space, seed: int = 0, *, known: Known | None = None,
                 proxy: Known | None = None) -> None:
        super().__init__(space, iter(range(space.size)))


class RandomStrategy(_Ordered):
    """Combinations drawn uniformly without replacement, in an order fixed by the seed."""

    name = "random"

    def __init__(self, space: Space, seed: int = 0, *, known: Known | None = None,
                 proxy: Known | None = None) -> None:
        order = list(range(space.size))
        random.Random(seed).shuffle(order)
        super().__init__(space, iter(order))


def _nsga2(space: Space, seed: int = 0, *, known: Known | None = None,
           proxy: Known | None = None) -> Strategy:
    from codesign.sweep.nsga2 import Nsga2Strategy

    return Nsga2Strategy(space, seed, known=known)


def _surrogate(space: Space, seed: int = 0, *, known: Known | None = None,
               proxy: Known | None = None) -> Strategy:
    from codesign.sweep.surrogate import SurrogateStrategy  # scipy loads only when used

    return SurrogateStrategy(space, seed, known=known, proxy=proxy)


# Each strategy's maker: (space, seed, known=..., proxy=...) -> Strategy.
STRATEGIES: dict[str, Callable[..., Strategy]] = {
    "grid": GridStrategy, "random": RandomStrategy, "nsga2": _nsga2, "surrogate": _surrogate}
DEFAULT_STRATEGY = "surrogate"


def make_strategy(name: str, space: Space, seed: int, *, known: Known | None = None,
                  proxy: Known | None = None) -> Strategy:
    """The strategy called `name` over `space`; InputError for an unknown name."""
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy {name!r} (one of {', '.join(STRATEGIES)})")
    return STRATEGIES[name](space, seed, known=known, proxy=proxy)


__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "Failure", "GridStrategy", "Known", "Outcome", "RandomStrategy",
           "Strategy", "make_strategy"]
