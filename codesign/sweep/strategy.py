"""Search strategies: which points a sweep evaluates next.

A strategy is an ask/tell object over a `Space`: `ask(n)` gives up to n points it has neither
given nor been told about ([] when it has nothing more), and `tell(point, outcome)` reports a
point's `PointResult` or `Failure` (an infeasible point is a Failure too).  The engine tells a
resumed strategy every stored point first, in the order they finished, so a strategy rebuilt from
the store continues where it stopped; given the same seed and the same tells, a strategy asks the
same points.  An adaptive strategy (NSGA-II, a surrogate) reads the metrics it minimises from
`space.metrics` and works on `space.coordinates(point)` / `space.point_with(coords)`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space
from hw.errors import InputError


@dataclass(frozen=True)
class Failure:
    """A point with no result: status 'infeasible', 'error', 'timeout' or 'crash', and why."""

    status: str
    reason: str


Outcome = PointResult | Failure


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

    def __init__(self, space: Space, seed: int = 0) -> None:
        super().__init__(space, iter(range(space.size)))


class RandomStrategy(_Ordered):
    """Combinations drawn uniformly without replacement, in an order fixed by the seed."""

    name = "random"

    def __init__(self, space: Space, seed: int = 0) -> None:
        order = list(range(space.size))
        random.Random(seed).shuffle(order)
        super().__init__(space, iter(order))


STRATEGIES: dict[str, Callable[[Space, int], Strategy]] = {"grid": GridStrategy, "random": RandomStrategy}


def make_strategy(name: str, space: Space, seed: int) -> Strategy:
    try:
        return STRATEGIES[name](space, seed)
    except KeyError:
        raise InputError(f"unknown strategy {name!r} (one of {', '.join(STRATEGIES)})") from None


__all__ = ["STRATEGIES", "Failure", "GridStrategy", "Outcome", "RandomStrategy", "Strategy", "make_strategy"]
