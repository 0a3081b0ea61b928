"""NSGA-II on a space's discrete coordinates (Deb et al. 2002), as an ask/tell strategy.

The genome of a point is `space.coordinates(point)`: the index of its value in each dimension.
Generation 0 is a random sample of feasible points; each later generation's children come from
the parents by binary tournament (lower non-domination rank wins, then larger crowding
distance), uniform crossover and per-dimension mutation to a neighbouring value.  When a
generation's `population` points have been told, the parents and children are ranked together
and the best `population` survive as the next parents.  A point that failed (error, crash,
time-out) or is infeasible is dominated by every point with a result.

A child that is invalid, infeasible (`space.violation`, cheap) or already asked or told is
skipped, so no point is asked twice.  The state is a function of the seed and the told points in
order: generation g's parents come from the first g blocks of `population` tells, and its
children are drawn from a random stream seeded by (seed, g) that skips the points seen, so a
strategy rebuilt from a store asks what the interrupted one would have asked next.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from codesign.sweep.pareto import non_dominated
from codesign.sweep.space import Point, Space
from codesign.sweep.strategy import Failure, Known, Outcome
from hw.errors import InputError

STALL_TRIES = 200  # children in a row that are all seen or infeasible before random ones fill in


@dataclass(frozen=True)
class Individual:
    """A told point: its genome, and its objective values (None: failed or infeasible)."""

    id: str
    genome: tuple[int, ...]
    values: tuple[float, ...] | None


class Nsga2Strategy:
    """NSGA-II (module docstring); `population` points per generation, `crossover` the
    probability that a child mixes its two parents (else it copies the tournament's winner)."""

    name = "nsga2"

    def __init__(self, space: Space, seed: int = 0, *, known: Known | None = None, population: int = 20,
                 crossover: float = 0.9) -> None:
        if population < 2:
            raise InputError(f"nsga2: population must be at least 2, not {population}")
        self.space, self.seed, self.population, self.crossover = space, seed, population, crossover
        self.lengths = tuple(len(d.values) for d in space.dimensions)
        self.mutation = 1.0 / max(len(self.lengths), 1)
        self.seen: set[str] = set()
        self.asked: set[str] = set()
        self.parents: list[Individual] = []
        self.children: list[Individual] = []  # told in the current generation
        self.generation = 0
        self.stream: Iterator[Point] | None = None

    # -- ask / tell ------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Point]:
        """Up to n new points, at most the rest of the current generation (more only when points
        asked earlier were never told)."""
        room = self.population - len(self.children) - len(self.asked)
        want = min(n, room) if room > 0 else n
        if self.stream is None:
            self.stream = self._children() if self.parents else self._random(random.Random(self._key("g0")))
        points: list[Point] = []
        for point in self.stream:
            self.seen.add(point.id)
            self.asked.add(point.id)
            points.append(point)
            if len(points) >= want:
                break
        return points

    def tell(self, point: Point, outcome: Outcome) -> None:
        self.seen.add(point.id)
        self.asked.discard(point.id)
        values = _values(outcome, self.space.metrics)
        self.children.append(Individual(point.id, self.space.coordinates(point), values))
        if len(self.children) >= self.population:
            self.parents = survivors(self.parents + self.children, self.population)
            self.children = []
            self.generation += 1
            self.stream = None

    # -- the streams of candidate points ------------------------------------------------------
    def _key(self, tag: str) -> str:
        return f"nsga2:{self.seed}:{self.generation}:{tag}"

    def _new(self, point: Point | None) -> bool:
        return point is not None and point.id not in self.seen and self.space.violation(point) is None

    def _random(self, rng: random.Random) -> Iterator[Point]:
        """Feasible points not yet seen, drawn at random; the rest in a seeded order when draws
        keep hitting seen ones; ends when every feasible point is seen."""
        misses = 0
        while misses < STALL_TRIES:
            point = self.space.point_at(rng.randrange(self.space.size))
            if self._new(point):
                misses = 0
                assert point is not None
                yield point
            else:
                misses += 1
        rest = list(self.space.feasible_indices())
        rng.shuffle(rest)
        for index in rest:
            point = self.space.point_at(index)
            if self._new(point):
                assert point is not None
                yield point

    def _children(self) -> Iterator[Point]:
        rng = random.Random(self._key("children"))
        ranks, crowding = rank_and_crowding(self.parents)
        misses = 0
        while misses < STALL_TRIES:
            genome = self._child(rng, ranks, crowding)
            point = self.space.point_with(genome)
            if self._new(point):
                misses = 0
                assert point is not None
                yield point
            else:
                misses += 1
        yield from self._random(random.Random(self._key("fill")))

    def _child(self, rng: random.Random, ranks: list[int], crowding: list[float]) -> tuple[int, ...]:
        def pick() -> tuple[int, ...]:
            a, b = rng.randrange(len(self.parents)), rng.randrange(len(self.parents))
            better = a if (ranks[a], -crowding[a]) <= (ranks[b], -crowding[b]) else b
            return self.parents[better].genome

        first, second = pick(), pick()
        if rng.random() < self.crossover:
            genes = [x if rng.random() < 0.5 else y for x, y in zip(first, second, strict=True)]
        else:
            genes = list(first)
        for i, length in enumerate(self.lengths):
            if length > 1 and rng.random() < self.mutation:
                genes[i] = _neighbour(rng, genes[i], length)
        return tuple(genes)


def _neighbour(rng: random.Random, gene: int, length: int) -> int:
    """A value one step away (two, one time in four), within the dimension."""
    step = 2 if rng.random() < 0.25 and length > 2 else 1
    moved = gene + (step if rng.random() < 0.5 else -step)
    if not 0 <= moved < length:
        moved = gene - (moved - gene)
    return min(max(moved, 0), length - 1)


def _values(outcome: Outcome, metrics: tuple[str, ...]) -> tuple[float, ...] | None:
    """The minimised metrics of a result (log scale: crowding compares ratios), or None."""
    if isinstance(outcome, Failure):
        return None
    found = [outcome.metrics.get(m) for m in metrics]
    if any(v is None or not v > 0 for v in found):
        return None
    return tuple(float(np.log(v)) for v in found)  # type: ignore[arg-type]


def rank_and_crowding(pool: list[Individual]) -> tuple[list[int], list[float]]:
    """Each individual's non-domination rank (0 best; failed ones rank after every front) and
    crowding distance within its front (infinite at a front's extremes)."""
    ranks = [0] * len(pool)
    crowding = [0.0] * len(pool)
    alive = [i for i, x in enumerate(pool) if x.values is not None]
    rank = 0
    while alive:
        values = np.array([pool[i].values for i in alive], dtype=float)
        mask = non_dominated(values)
        front = [i for i, keep in zip(alive, mask, strict=True) if keep]
        for i, distance in zip(front, _crowding(values[mask]), strict=True):
            ranks[i], crowding[i] = rank, distance
        alive = [i for i, keep in zip(alive, mask, strict=True) if not keep]
        rank += 1
    for i, x in enumerate(pool):
        if x.values is None:
            ranks[i] = rank
    return ranks, crowding


def _crowding(values: np.ndarray) -> list[float]:
    n, m = values.shape
    distance = np.zeros(n)
    for j in range(m):
        order = np.argsort(values[:, j], kind="stable")
        span = values[order[-1], j] - values[order[0], j]
        distance[order[0]] = distance[order[-1]] = np.inf
        if n > 2 and span > 0:
            distance[order[1:-1]] += (values[order[2:], j] - values[order[:-2], j]) / span
    return [float(d) for d in distance]


def survivors(pool: list[Individual], size: int) -> list[Individual]:
    """The `size` best of `pool` by rank, then crowding distance (ties: the earlier told)."""
    ranks, crowding = rank_and_crowding(pool)
    order = sorted(range(len(pool)), key=lambda i: (ranks[i], -crowding[i], i))
    return [pool[i] for i in order[:size]]


__all__ = ["Individual", "Nsga2Strategy", "rank_and_crowding", "survivors"]
