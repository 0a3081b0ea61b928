"""`codesign bench sweep-search`: how fast each search strategy finds an exhaustive sweep's front.

Given the table of an exhaustive sweep (every feasible point of a space evaluated: a store, or
the synthetic stand-in of `codesign.sweep.synthetic` on a packaged space), each strategy is
replayed against it (evaluating a point = looking it up) for several seeds, asking batches as
`run_sweep` does (infeasible points are told without counting as evaluations).  After every
evaluation the hypervolume of the points found so far is taken as a fraction of the exhaustive
front's, on log-normalised objectives in a box fixed by the table (from each objective's
smallest value to 1.1 x its largest), so fractions of different runs compare.  Reported per
strategy: the mean fraction at given shares of the table, the evaluations needed to reach
`target` (98%) per seed and their mean, and that mean's ratio to random search's.

Strategies get the table's known metrics (the area model's area, looked up) and, unless
`--no-proxy`, the proxy's estimates of every point (codesign/sweep/proxy.py; the synthetic
stand-in's cruder model on a synthetic table), computed once per table; their cost per point
is reported (`proxy_s_per_point`), since a sweep pays it before its first ask.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from codesign.sweep import synthetic
from codesign.sweep.pareto import Box, non_dominated
from codesign.sweep.records import PointResult
from codesign.sweep.space import Point, Space, point_id, space_from_text
from codesign.sweep.store import SweepStore
from codesign.sweep.strategy import DEFAULT_STRATEGY, STRATEGIES, Failure, Known, Outcome, make_strategy
from hw.config import AcceleratorConfig
from hw.errors import InputError

TARGET = 0.98
ASK = 16  # run_sweep's batch with 2 workers: max(8 x workers, 16)
CHECKPOINTS = (0.05, 0.1, 0.2, 0.3, 0.5)


@dataclass(frozen=True)
class Table:
    """An exhaustive sweep: every feasible point's outcome by id, and where it came from."""

    space: Space
    outcomes: dict[str, Outcome]
    source: str
    known_metrics: tuple[str, ...] = ()
    proxies: dict[str, dict[str, float]] = field(default_factory=dict)  # each point's proxy estimates
    proxy_s: float = 0.0  # seconds the proxy took for all of them (workloads prepared apart)

    @property
    def feasible(self) -> int:
        return len(self.outcomes)

    def values(self, ids: Sequence[str] | None = None) -> np.ndarray:
        """The space's metrics of the 'ok' points (those of `ids`, or all)."""
        keys = self.outcomes if ids is None else ids
        rows = [[o.metrics[m] for m in self.space.metrics] for i in keys
                if isinstance(o := self.outcomes[i], PointResult)]
        return np.array(rows, dtype=float).reshape(len(rows), len(self.space.metrics))

    def box(self) -> Box:
        values = self.values()
        return Box(tuple(values.min(axis=0)), tuple(values.max(axis=0) * 1.1))

    def known(self) -> Known | None:
        """The metrics known before a point runs (the analytical area), looked up in the table:
        the same numbers the model computes (NaN for a point that failed)."""
        if not self.known_metrics:
            return None
        names = self.known_metrics

        def lookup(cfg: AcceleratorConfig) -> dict[str, float]:
            found = self.outcomes.get(point_id(cfg))
            return {m: found.metrics[m] if isinstance(found, PointResult) else math.nan for m in names}

        return lookup

    def proxy(self) -> Known | None:
        """The proxy's estimates before a point runs (codesign/sweep/proxy.py), computed once
        for the table (None without them)."""
        if not self.proxies:
            return None
        proxies = self.proxies
        return lambda cfg: proxies.get(point_id(cfg), {})

    def with_proxies(self) -> Table:
        """This table with every feasible point's proxy estimates: the compiler's estimates of
        the space's workloads (prepared here: quantized once), or the synthetic stand-in's own
        cruder model for a synthetic table."""
        if self.source.startswith("synthetic"):
            estimate: Known = synthetic.proxy_metrics
        else:
            from codesign.sweep.prepare import prepare
            from codesign.sweep.proxy import Proxy

            estimate = Proxy([prepare(w) for w in self.space.workloads], self.space.batch_policy)
        start = time.perf_counter()
        proxies = {p.id: estimate(p.config) for p in self.space if p.id in self.outcomes}
        return replace(self, proxies=proxies, proxy_s=time.perf_counter() - start)


def synthetic_table(space: Space) -> Table:
    """Every feasible point of `space` evaluated by the synthetic stand-in (area known)."""
    outcomes: dict[str, Outcome] = {p.id: synthetic.evaluate(p) for p in space}
    known = ("area_mm2",) if "area_mm2" in space.metrics else ()
    return Table(space, outcomes, f"synthetic ({space.name})", known)


def read_table(path: str | Path) -> Table:
    """The table of an exhaustive sweep's store; InputError when it misses feasible points."""
    with SweepStore.read(path) as store:
        meta = store.meta()
        rows = store.points()
    space = space_from_text(meta["space_toml"], path=meta["space_path"])
    outcomes: dict[str, Outcome] = {}
    for row in rows:
        if row.status != "infeasible":
            outcomes[row.id] = row.result if row.result is not None else Failure(row.status, row.reason or "")
    missing = sum(p.id not in outcomes for p in space)
    if missing:
        raise InputError(f"{path}: not an exhaustive sweep ({missing} of {len(space)} feasible points "
                         "were never evaluated)")
    ok = {i: o for i, o in outcomes.items() if isinstance(o, PointResult)}
    if space.constraints.max_area_mm2 is not None:  # the sweep's own verdicts: a point it left out broke it
        space = space.with_area(lambda cfg: ok[i].metrics["area_mm2"] if (i := point_id(cfg)) in ok
                                else math.inf)
    known = tuple(m for m in space.metrics if m == "area_mm2"
                  and all(o.fidelity.get(m) == "estimate" for o in ok.values()))
    return Table(space, outcomes, str(path), known)


@dataclass(frozen=True)
class Run:
    """One strategy's replay for one seed: the hypervolume fraction after each evaluation."""

    strategy: str
    seed: int
    fractions: tuple[float, ...]
    search_s: float

    def reached(self, target: float) -> int | None:
        """The evaluations it took to reach `target` (None: never)."""
        return next((i + 1 for i, f in enumerate(self.fractions) if f >= target), None)


def replay(table: Table, strategy: str, seed: int, *, stop_at: float = TARGET, at_least: int = 0) -> Run:
    """Run `strategy` against `table` until its front reaches `stop_at` of the exhaustive
    hypervolume (and at least `at_least` evaluations) or the table runs out."""
    box = table.box()
    total = box.hypervolume(table.values()[non_dominated(table.values())])
    search = make_strategy(strategy, table.space, seed, known=table.known(), proxy=table.proxy())
    found: list[str] = []
    fractions: list[float] = []
    fraction, search_s = 0.0, 0.0
    while len(fractions) < table.feasible and (fraction < stop_at or len(fractions) < at_least):
        start = time.perf_counter()
        asked = search.ask(ASK)
        search_s += time.perf_counter() - start
        if not asked:
            break
        for point in asked:
            outcome = _lookup(table, point)
            start = time.perf_counter()
            search.tell(point, outcome)
            search_s += time.perf_counter() - start
            if isinstance(outcome, Failure) and outcome.status == "infeasible":
                continue
            if isinstance(outcome, PointResult):
                found.append(point.id)
                values = table.values(found)
                fraction = box.hypervolume(values[non_dominated(values)]) / total
            fractions.append(fraction)
    return Run(strategy, seed, tuple(fractions), search_s)


def _lookup(table: Table, point: Point) -> Outcome:
    reason = table.space.violation(point)
    if reason is not None:
        return Failure("infeasible", reason)
    return table.outcomes.get(point.id, Failure("error", "not in the table"))


@dataclass(frozen=True)
class SearchBench:
    """Every strategy's runs over the seeds, and the summary the issue asks for."""

    source: str
    space: str
    feasible: int
    metrics: tuple[str, ...]
    known: tuple[str, ...]
    budget_fraction: float
    runs: dict[str, tuple[Run, ...]] = field(default_factory=dict)
    proxy_s_per_point: float | None = None  # None: replayed without the proxy

    def summary(self, name: str) -> dict[str, Any]:
        runs = self.runs[name]
        needed = [r.reached(TARGET) for r in runs]
        counted = [n if n is not None else self.feasible for n in needed]
        budget = max(1, int(self.budget_fraction * self.feasible))
        return {"evaluations_to_98": needed, "mean_evaluations_to_98": float(np.mean(counted)),
                "mean_share_to_98": float(np.mean(counted)) / self.feasible,
                f"hv_fraction_at_{budget}": float(np.mean([_at(r, budget) for r in runs])),
                "hv_fraction_at_share": {str(s): float(np.mean([_at(r, max(1, int(s * self.feasible)))
                                                               for r in runs])) for s in CHECKPOINTS},
                "search_s_per_run": float(np.mean([r.search_s for r in runs]))}

    def to_json(self) -> dict[str, Any]:
        summaries = {name: self.summary(name) for name in self.runs}
        random_mean = summaries["random"]["mean_evaluations_to_98"] if "random" in summaries else None
        for data in summaries.values():
            data["ratio_to_random"] = data["mean_evaluations_to_98"] / random_mean if random_mean else None
        out: dict[str, Any] = {"source": self.source, "space": self.space, "feasible_points": self.feasible,
                               "metrics": list(self.metrics), "known_metrics": list(self.known),
                               "target": TARGET, "budget_fraction": self.budget_fraction,
                               "proxy": self.proxy_s_per_point is not None,
                               "proxy_s_per_point": self.proxy_s_per_point,
                               "seeds": len(next(iter(self.runs.values()), ())), "strategies": summaries}
        if DEFAULT_STRATEGY in summaries and random_mean:
            default = summaries[DEFAULT_STRATEGY]
            out["must_show_3"] = {
                "default": DEFAULT_STRATEGY, "mean_evaluations_to_98": default["mean_evaluations_to_98"],
                "budget": self.budget_fraction * self.feasible, "ratio_to_random": default["ratio_to_random"],
                "holds": bool(default["mean_evaluations_to_98"] <= self.budget_fraction * self.feasible
                              and default["ratio_to_random"] <= 0.5)}
        return out


def _at(run: Run, evaluations: int) -> float:
    if not run.fractions:
        return 0.0
    return run.fractions[min(evaluations, len(run.fractions)) - 1]


def run(table: Table, *, strategies: Sequence[str] | None = None, seeds: int = 5,
        budget_fraction: float = 0.1) -> SearchBench:
    """Replay each strategy (default: every one but grid) for seeds 0..seeds-1."""
    if seeds < 1:
        raise InputError(f"--seeds must be at least 1, not {seeds}")
    if not 0 < budget_fraction <= 1:
        raise InputError(f"--budget-fraction must be in (0, 1], not {budget_fraction}")
    names = list(strategies) if strategies else [s for s in STRATEGIES if s != "grid"]
    for name in names:
        if name not in STRATEGIES:
            raise InputError(f"unknown strategy {name!r} (one of {', '.join(STRATEGIES)})")
    if not table.space.metrics or table.values().shape[0] == 0:
        raise InputError(f"{table.source}: the table has no evaluated point with the space's objectives")
    bench = SearchBench(table.source, table.space.name, table.feasible, table.space.metrics,
                        table.known_metrics, budget_fraction,
                        proxy_s_per_point=table.proxy_s / table.feasible if table.proxies else None)
    at_least = max(1, int(max(CHECKPOINTS) * table.feasible))
    for name in names:
        bench.runs[name] = tuple(replay(table, name, seed, at_least=at_least) for seed in range(seeds))
    return bench


def table_text(result: SearchBench) -> str:
    """A fixed-width table of the summary, one row per strategy."""
    data = result.to_json()
    head = (f"{'strategy':<10}{'evals to 98%':>14}{'share':>8}{'vs random':>11}{'hv@budget':>11}"
            f"{'search s':>10}")
    proxy = (f"proxy {data['proxy_s_per_point']:.3f} s/point" if data["proxy"] else "no proxy")
    lines = [f"{data['source']}: {data['feasible_points']} feasible points, objectives "
             f"{', '.join(data['metrics'])} (known: {', '.join(data['known_metrics']) or 'none'}; "
             f"{proxy})", head]
    for name, s in data["strategies"].items():
        hv = next(v for k, v in s.items() if k.startswith("hv_fraction_at_") and k != "hv_fraction_at_share")
        ratio = f"{s['ratio_to_random']:.2f}" if s["ratio_to_random"] is not None else "-"
        lines.append(f"{name:<10}{s['mean_evaluations_to_98']:>14.1f}{s['mean_share_to_98']:>8.3f}"
                     f"{ratio:>11}{hv:>11.4f}{s['search_s_per_run']:>10.2f}")
    if "must_show_3" in data:
        lines.append(f"must-show 3 ({data['must_show_3']['default']}): "
                     f"{'holds' if data['must_show_3']['holds'] else 'does not hold'}")
    return "\n".join(lines)


__all__ = ["ASK", "TARGET", "Run", "SearchBench", "Table", "read_table", "replay", "run", "synthetic_table",
           "table_text"]
