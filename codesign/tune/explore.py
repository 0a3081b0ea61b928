"""Explorers: which points to measure next.

`ModelExplorer` is AutoTVM's: simulated annealing over the knob space (a step changes one knob by
one position along its value list), its energy the cost model's prediction, proposes the best
unmeasured points it visits, plus a fraction `epsilon` of random points so a wrong model still
learns.  `RandomExplorer` and `GridExplorer` are the baselines.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from codesign.tune.model import CostModel
from compiler.tune.space import Space

METHODS = ("model", "random", "grid")


@dataclass
class History:
    """Measured points of one space: index -> cycles (None when the trial failed)."""

    cycles: dict[int, int | None] = field(default_factory=dict)

    def ok(self) -> tuple[np.ndarray, np.ndarray]:
        rows = [(i, c) for i, c in self.cycles.items() if c is not None]
        index = np.array([i for i, _ in rows], dtype=np.int64)
        return index, np.array([c for _, c in rows], dtype=np.float64)


@dataclass
class Prior:
    """Measurements of other workloads (features, cycles, group ids) to train with: transfer."""

    x: np.ndarray
    cycles: np.ndarray
    groups: np.ndarray


class Explorer:
    def propose(self, history: History, n: int) -> list[int]:
        raise NotImplementedError


class RandomExplorer(Explorer):
    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space, self.rng = space, np.random.default_rng(seed)

    def propose(self, history: History, n: int) -> list[int]:
        left = np.array([i for i in range(len(self.space)) if i not in history.cycles], dtype=np.int64)
        return [int(i) for i in self.rng.permutation(left)[:n]]


class GridExplorer(Explorer):
    """The grid in order, from a seeded offset (so seeds differ)."""

    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space = space
        self.offset = int(np.random.default_rng(seed).integers(len(space)))

    def propose(self, history: History, n: int) -> list[int]:
        order = [(self.offset + k) % len(self.space) for k in range(len(self.space))]
        return [i for i in order if i not in history.cycles][:n]


class ModelExplorer(Explorer):
    def __init__(self, space: Space, seed: int = 0, *, epsilon: float = 0.1, objective: str = "log",
                 prior: Prior | None = None, chains: int = 16, steps: int = 40) -> None:
        self.space, self.seed, self.epsilon = space, seed, epsilon
        self.rng = np.random.default_rng(seed)
        self.model = CostModel(objective, seed)
        self.prior, self.chains, self.steps = prior, chains, steps
        self.random = RandomExplorer(space, seed + 7919)

    def propose(self, history: History, n: int) -> list[int]:
        index, cycles = history.ok()
        if len(index) < 2 and self.prior is None:  # nothing to learn from yet
            return self.random.propose(history, n)
        self._fit(index, cycles)
        explore = round(self.epsilon * n) if len(index) >= 2 else 0
        picked = anneal(self.space, self._score, history, n - explore, self.rng, self.chains, self.steps,
                        starts=[int(i) for i in index[np.argsort(cycles)[: self.chains // 2]]])
        seen = {**history.cycles, **dict.fromkeys(picked)}
        return picked + self.random.propose(History(seen), n - len(picked))  # type: ignore[arg-type]

    def _fit(self, index: np.ndarray, cycles: np.ndarray) -> None:
        x, groups = self.space.features[index], np.zeros(len(index), dtype=np.int64)
        if self.prior is not None:
            x = np.vstack([x, self.prior.x])
            cycles = np.concatenate([cycles, self.prior.cycles])
            groups = np.concatenate([groups, self.prior.groups + 1])
        self.model.fit(x, cycles, groups)
        # One prediction call for the whole space (a few thousand rows, milliseconds); the
        # walks look scores up.  A space too large for that would predict per step instead.
        self._scores = self.model.predict(self.space.features)

    def _score(self, points: list[int]) -> np.ndarray:
        return self._scores[np.asarray(points, dtype=np.int64)]


def anneal(space: Space, score: Callable[[list[int]], np.ndarray], history: History, n: int,
           rng: np.random.Generator, chains: int, steps: int, starts: list[int]) -> list[int]:
    """Simulated annealing on the neighbour graph of `space`: the `n` best-scoring unmeasured
    points visited by `chains` walks of `steps` steps (from `starts`, then random points)."""
    if n <= 0:
        return []
    walkers = (starts + [int(i) for i in rng.integers(len(space), size=chains)])[:chains]
    energy = score(walkers)
    best: list[tuple[float, int]] = []  # min-heap of (score, index) of unmeasured points
    inside: set[int] = set()

    def visit(points: list[int], scores: np.ndarray) -> None:
        for i, s in zip(points, scores, strict=True):
            if i in history.cycles or i in inside:
                continue
            inside.add(i)
            heapq.heappush(best, (float(s), i))
            if len(best) > n:
                inside.discard(heapq.heappop(best)[1])

    visit(walkers, energy)
    spread = float(np.std(energy)) or 1.0
    for step in range(steps):
        temperature = spread * (1.0 - step / steps)
        moves = []
        for w in walkers:
            options = space.neighbours(w)
            jump = not options or rng.random() < 0.05
            moves.append(int(rng.integers(len(space))) if jump else options[int(rng.integers(len(options)))])
        proposed = score(moves)
        visit(moves, proposed)
        gain = proposed - energy
        accept = (gain >= 0) | (rng.random(len(moves)) < np.exp(gain / max(temperature, 1e-9)))
        walkers = [m if a else w for w, m, a in zip(walkers, moves, accept, strict=True)]
        energy = np.where(accept, proposed, energy)
    return [i for _, i in sorted(best, reverse=True)]


def make_explorer(method: str, space: Space, seed: int = 0, **options: object) -> Explorer:
    if method == "model":
        return ModelExplorer(space, seed, **options)  # type: ignore[arg-type]
    if method == "random":
        return RandomExplorer(space, seed)
    if method == "grid":
        return GridExplorer(space, seed)
    raise ValueError(f"unknown search method {method!r}; choose one of {', '.join(METHODS)}")
