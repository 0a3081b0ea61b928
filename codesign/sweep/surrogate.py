"""A model-guided strategy: a surrogate of the objectives, trained on the points evaluated so
far, picks which unevaluated points run next.

With a `proxy` (cheap analytical estimates of the predicted metrics for every candidate before
it runs: codesign/sweep/proxy.py, the compiler's estimates of the workloads' schedules):

1. The proxy's front first: candidates are picked greedily by the hypervolume they are
   estimated to add (log scale, normalised by the candidates' ranges; known metrics exact,
   the others the proxy's estimate corrected by its median log error on the points evaluated
   so far, evaluated points as they ran), each added to the front as if it had run; a whole
   asked batch at once, since the estimates do not change between picks.
2. When the proxy predicts no candidate adds anything, the model below, fitted on the
   residual: log metric - log estimate, with the estimates among the features.

Without a proxy (or one that misses a predicted metric, more than 3 objectives, more than
PROXY_LIMIT candidates):

1. Initial design: `initial` feasible points spread over the space (maximin in the normalised
   coordinates, the first drawn by the seed): the extremes and the middle, since a Pareto
   front's hypervolume depends most on them.
2. Then each batch: a Gaussian process per objective that is not known in advance (an ARD
   Matern kernel on log2 of each parameter, of the MACs per cycle and of the SRAM bytes)
   is fitted on the evaluated points' log metrics; objectives the `known` function gives
   (the area model's area) are taken exactly.  Every unevaluated feasible point of the space is
   predicted at once (vectorised; spaces of 10^5 points), optimistically (mean - `beta` std),
   and the batch is picked greedily: the point whose optimistic objectives add most
   hypervolume to the front of the evaluated points (log scale, normalised by their ranges),
   which is then added to the front as if it had run, and so on.  When no point is predicted
   to improve the front, the most uncertain one runs.

Points that failed or are infeasible train nothing and are never asked again.  The strategy's
state is the set of points told (their order does not matter: training data is sorted by id)
and the seed, so a strategy rebuilt from a store asks what the interrupted one would have.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from codesign.sweep.gp import GaussianProcess
from codesign.sweep.hvi import improvements
from codesign.sweep.pareto import non_dominated
from codesign.sweep.space import Point, Space, sram_bytes
from codesign.sweep.strategy import Failure, Known, Outcome
from hw.config import AcceleratorConfig
from hw.errors import InputError, WorkbenchError

MAX_TRAIN = 256  # points a GP is fitted on (the nearest the front first): fits stay ~1 s
PROXY_LIMIT = 1024  # the most candidates the proxy estimates (~0.07 s each for ResNet-18)
SHORTLIST = 2048  # candidates whose exact improvement is computed (by a cheap optimistic proxy)


def features(configs: list[AcceleratorConfig], space: Space) -> np.ndarray:
    """log2 of each varied parameter, of the MACs per cycle and of the SRAM bytes (n x f)."""
    rows = [[math.log2(getattr(cfg, d.name)) for d in space.dimensions]
            + [math.log2(cfg.macs_per_cycle), math.log2(sram_bytes(cfg))] for cfg in configs]
    return np.array(rows, dtype=float).reshape(len(configs), len(space.dimensions) + 2)


@dataclass
class _Candidates:
    """The space's feasible points, their scaled features and their known metrics (log)."""

    points: list[Point]
    row: dict[str, int]
    x: np.ndarray
    known: np.ndarray  # n x len(known metrics)
    low: np.ndarray
    span: np.ndarray
    prior: np.ndarray  # n x len(predicted metrics): the proxy's log estimate (0 without one)

    def scale(self, x: np.ndarray) -> np.ndarray:
        return (x - self.low) / self.span


class SurrogateStrategy:
    """The model-guided strategy of the module docstring."""

    name = "surrogate"

    def __init__(self, space: Space, seed: int = 0, *, known: Known | None = None, proxy: Known | None = None,
                 initial: int | None = None, batch: int = 2, beta: float = 1.0) -> None:
        if batch < 1:
            raise InputError(f"surrogate: batch must be at least 1, not {batch}")
        self.space, self.seed, self.known, self.proxy = space, seed, known, proxy
        self.batch, self.beta = batch, beta
        self.initial = initial if initial is not None else max(6, len(space.dimensions) + 3)
        given = known(space.base) if known is not None else {}
        self.known_metrics = tuple(m for m in space.metrics if m in given)
        self.predicted = tuple(m for m in space.metrics if m not in self.known_metrics)
        self.proxied: tuple[str, ...] = ()  # the predicted metrics the proxy estimates (set with the table)
        self.seen: set[str] = set()
        self.asked: set[str] = set()
        self.results: dict[str, tuple[AcceleratorConfig, tuple[float, ...]]] = {}
        self._table: _Candidates | None = None
        self._design: list[int] | None = None

    # -- ask / tell ------------------------------------------------------------------------------
    def tell(self, point: Point, outcome: Outcome) -> None:
        self.seen.add(point.id)
        self.asked.discard(point.id)
        if isinstance(outcome, Failure):
            return
        values = [outcome.metrics.get(m) for m in self.space.metrics]
        if all(v is not None and v > 0 for v in values):
            self.results[point.id] = (point.config, tuple(math.log(v) for v in values))  # type: ignore[arg-type]

    def ask(self, n: int) -> list[Point]:
        table = self._candidates()
        open_rows = np.array([p.id not in self.seen for p in table.points], dtype=bool)
        if not open_rows.any() or n < 1:  # also a space without feasible points
            return []
        if self._proxy_design():
            rows = self._from_proxy(open_rows, n)
        elif len(self.results) < self.initial:
            want = min(n, max(1, self.initial - len(self.results) - len(self.asked)))
            rows = self._from_design(open_rows, want)
        else:
            rows = self._from_model(open_rows, min(n, max(self.batch, len(self.results) // 16)))
        points = [table.points[r] for r in rows]
        self.seen.update(p.id for p in points)
        self.asked.update(p.id for p in points)
        return points

    # -- the candidates and the initial design --------------------------------------------------
    def _candidates(self) -> _Candidates:
        if self._table is None:
            points = [p for p in map(self.space.point_at, self.space.feasible_indices()) if p is not None]
            configs = [p.config for p in points]
            x = features(configs, self.space)
            low, high = x.min(axis=0, initial=np.inf), x.max(axis=0, initial=-np.inf)
            known = self._known(configs)
            prior = self._prior(configs)
            if self.proxied:  # the proxy's estimates are features too (log, scaled like the rest)
                x = np.hstack([x, prior[:, [self.predicted.index(m) for m in self.proxied]]])
                low, high = x.min(axis=0, initial=np.inf), x.max(axis=0, initial=-np.inf)
            self._table = _Candidates(points, {p.id: i for i, p in enumerate(points)}, x, known, low,
                                      np.where(high > low, high - low, 1.0), prior)
        return self._table

    def _prior(self, configs: list[AcceleratorConfig]) -> np.ndarray:
        """The proxy's log estimate of each predicted metric (n x predicted; 0 where it has none);
        sets `proxied`, the metrics it estimates (positive) for every candidate (none when it
        raises a WorkbenchError for any)."""
        prior = np.zeros((len(configs), len(self.predicted)))
        if self.proxy is None or not configs or len(configs) > PROXY_LIMIT:
            return prior
        try:
            rows = [self.proxy(cfg) for cfg in configs]
        except WorkbenchError:  # a proxy that cannot estimate every candidate is not used
            return prior
        self.proxied = tuple(m for m in self.predicted
                             if all(isinstance(r.get(m), float | int) and r[m] > 0 for r in rows))
        for m in self.proxied:
            prior[:, self.predicted.index(m)] = np.log([r[m] for r in rows])
        return prior

    def _known(self, configs: list[AcceleratorConfig]) -> np.ndarray:
        if not self.known_metrics or self.known is None:
            return np.zeros((len(configs), 0))
        values = np.array([[self.known(cfg)[m] for m in self.known_metrics] for cfg in configs], dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            logs = np.log(values)
        # A point whose known metric is missing (NaN) counts as the worst of the space in it.
        finite = np.isfinite(logs)
        worst = np.where(finite, logs, -np.inf).max(axis=0, initial=0.0)
        return np.where(finite, logs, worst)

    def _proxy_design(self) -> bool:
        """Whether the proxy estimates every predicted metric (of at most 3): then the search
        follows the front it predicts first."""
        self._candidates()
        return (bool(self.predicted) and len(self.proxied) == len(self.predicted)
                and len(self.space.metrics) <= 3)

    def _from_proxy(self, open_rows: np.ndarray, want: int) -> list[int]:
        """Up to `want` points predicted by the calibrated proxy to add hypervolume; when it
        predicts fewer, the rest from the model of what it misses (or, before 2 results, the
        maximin design)."""
        table = self._candidates()
        rows = self._greedy_front(table, open_rows, want)
        if len(rows) < want:
            rest = open_rows.copy()
            rest[rows] = False
            if rest.any():  # the model's batches are as small as without a proxy
                more = min(want - len(rows), max(self.batch, len(self.results) // 16))
                rows += (self._from_model(rest, more) if len(self.results) >= 2
                         else self._from_design(rest, more))
        return rows

    def _from_design(self, open_rows: np.ndarray, want: int) -> list[int]:
        """The next `want` unseen points of the maximin design (fixed by the seed), extended
        while failures leave too few."""
        table = self._candidates()
        x = table.scale(table.x)
        count = self.initial * 3
        while True:
            self._design = maximin_order(x, count, random.Random(f"surrogate:{self.seed}"), self._design)
            rows = [r for r in self._design if open_rows[r]][:want]
            if len(rows) >= want or len(self._design) >= len(x):
                return rows
            count = 2 * len(self._design)

    def _greedy_front(self, table: _Candidates, open_rows: np.ndarray, want: int) -> list[int]:
        """`want` open candidates, each adding most hypervolume to those picked before it (and to
        the evaluated points) under the proxy's estimates with the known metrics exact."""
        estimate = np.zeros((len(table.points), len(self.space.metrics)))
        ids = sorted(i for i in self.results if i in table.row)
        told = np.array([table.row[i] for i in ids], dtype=int)
        observed = self._observed(ids)
        for j, metric in enumerate(self.space.metrics):
            if metric in self.known_metrics:
                estimate[:, j] = table.known[:, self.known_metrics.index(metric)]
                continue
            p = self.predicted.index(metric)
            # The proxy's bias, as the evaluated points show it (its median log error).
            offset = float(np.median(observed[:, j] - table.prior[told, p])) if len(ids) else 0.0
            estimate[:, j] = table.prior[:, p] + offset
        if len(ids):  # what ran counts as it ran
            estimate[told] = observed
        low = estimate.min(axis=0)
        estimate = (estimate - low) / np.maximum(estimate.max(axis=0) - low, 1e-9)
        done = [table.row[i] for i in self.seen if i in table.row and not open_rows[table.row[i]]]
        front = estimate[done][non_dominated(estimate[done])] if done else estimate[:0]
        rows = np.flatnonzero(open_rows)
        available = np.ones(len(rows), dtype=bool)
        picked: list[int] = []
        zero = np.zeros_like(estimate[rows])
        while len(picked) < min(want, len(rows)):
            best = _best(front, estimate[rows], np.full(estimate.shape[1], 1.1), available, zero,
                         fallback=False)
            if best < 0:
                break
            picked.append(int(rows[best]))
            available[best] = False
            front = np.vstack([front, estimate[rows[best]]])
        return picked

    # -- the model's picks ----------------------------------------------------------------------
    def _observed(self, ids: list[str]) -> np.ndarray:
        """The log metrics of these evaluated points (len(ids) x metrics)."""
        rows = [self.results[i][1] for i in ids]
        return np.array(rows, dtype=float).reshape(len(ids), len(self.space.metrics))

    def _training(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scaled features, log metrics and the proxy's log estimates of the evaluated candidates
        (by id; the MAX_TRAIN of lowest non-domination rank when there are more)."""
        table = self._candidates()
        ids = sorted(i for i in self.results if i in table.row)
        rows = np.array([table.row[i] for i in ids], dtype=int)
        y = self._observed(ids)
        x, prior = table.scale(table.x[rows]), table.prior[rows]
        if len(ids) > MAX_TRAIN:
            keep = np.sort(np.argsort(_ranks(y), kind="stable")[:MAX_TRAIN])
            x, y, prior = x[keep], y[keep], prior[keep]
        return x, y, prior

    def _predict(self, open_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) of every metric (log) at the open candidates; known metrics exact, std 0."""
        table = self._candidates()
        x_train, y_train, prior_train = self._training()
        x_open = table.scale(table.x[open_rows])
        mean = np.zeros((len(x_open), len(self.space.metrics)))
        std = np.zeros_like(mean)
        for j, metric in enumerate(self.space.metrics):
            if metric in self.known_metrics:
                mean[:, j] = table.known[open_rows, self.known_metrics.index(metric)]
            else:  # the proxy's estimate (0 without one) plus a model of what it misses
                p = self.predicted.index(metric)
                residual, std[:, j] = _fit_predict(x_train, y_train[:, j] - prior_train[:, p], x_open)
                mean[:, j] = table.prior[open_rows, p] + residual
        return mean, std

    def _from_model(self, open_rows: np.ndarray, want: int) -> list[int]:
        rows = np.flatnonzero(open_rows)
        mean, std = self._predict(open_rows)
        observed = np.array([v for _, v in self.results.values()], dtype=float)
        low = observed.min(axis=0)
        span = np.maximum(observed.max(axis=0) - low, 1e-9)
        front = ((observed - low) / span)[non_dominated(observed)]
        hopeful = (mean - self.beta * std - low) / span
        reference = np.full(observed.shape[1], 1.1)
        picked: list[int] = []
        available = np.ones(len(rows), dtype=bool)
        while len(picked) < min(want, len(rows)):
            best = _best(front, hopeful, reference, available, std)
            picked.append(int(rows[best]))
            available[best] = False
            front = np.vstack([front, hopeful[best]])
        return picked


def _best(front: np.ndarray, hopeful: np.ndarray, reference: np.ndarray, available: np.ndarray,
          std: np.ndarray, fallback: bool = True) -> int:
    """The available candidate adding most hypervolume, or the most uncertain when none adds any
    (ties: the first; -1 without `fallback`)."""
    index = np.flatnonzero(available)
    values = hopeful[index]
    # Only candidates the front does not weakly dominate can add anything.
    dominated = np.zeros(len(index), dtype=bool)
    for f in front:
        dominated |= np.all(f <= values, axis=1)
    hope = index[~dominated & np.all(values < reference, axis=1)]
    if len(hope):
        volume = np.prod(reference - hopeful[hope], axis=1)  # of each one's own orthant: a cheap proxy
        if len(reference) > 3:  # exact improvements only up to 3 objectives
            return int(hope[int(np.argmax(volume))])
        if len(hope) > SHORTLIST:
            hope = hope[np.sort(np.argsort(-volume, kind="stable")[:SHORTLIST])]
        gains = improvements(front, hopeful[hope], reference)
        if gains.max() > 0:
            return int(hope[int(np.argmax(gains))])
    if not fallback:
        return -1
    return int(index[int(np.argmax(std[index].sum(axis=1)))])


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each row's non-domination rank (0: the front)."""
    ranks = np.zeros(len(values), dtype=int)
    alive = np.arange(len(values))
    rank = 0
    while len(alive):
        mask = non_dominated(values[alive])
        ranks[alive[mask]] = rank
        alive = alive[~mask]
        rank += 1
    return ranks


def _fit_predict(x: np.ndarray, y: np.ndarray, x_new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian process (ARD Matern 5/2 plus noise) fitted on (x, y), predicting x_new."""
    return GaussianProcess().fit(x, y).predict(x_new)


def maximin_order(x: np.ndarray, count: int, rng: random.Random, start: list[int] | None = None) -> list[int]:
    """`count` rows of `x` (at most all), each the farthest from those before it (the first at
    random; ties: the lowest row); continues `start`, an earlier order of the same rows."""
    if len(x) == 0:
        return []
    order = list(start) if start else [rng.randrange(len(x))]
    nearest = np.min([np.linalg.norm(x - x[row], axis=1) for row in order], axis=0)
    while len(order) < min(count, len(x)):
        row = int(np.argmax(nearest))
        order.append(row)
        nearest = np.minimum(nearest, np.linalg.norm(x - x[row], axis=1))
    return order


__all__ = ["MAX_TRAIN", "SurrogateStrategy", "features", "maximin_order"]
