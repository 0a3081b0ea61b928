"""Replaying a strategy against the synthetic stand-in, as the engine would, for the strategies' tests."""

import numpy as np

from codesign.sweep import synthetic
from codesign.sweep.pareto import Box, non_dominated
from codesign.sweep.strategy import Failure


def run(strategy, space, evaluations, ask=16, fail=lambda point: False):
    """Ask/tell until `evaluations` points ran; the asked points in order and the results' values."""
    asked, values = [], []
    while len(values) < evaluations and (batch := strategy.ask(min(ask, evaluations - len(values)))):
        for point in batch:
            asked.append(point)
            reason = space.violation(point)
            if reason is not None:
                strategy.tell(point, Failure("infeasible", reason))
                continue
            if fail(point):
                strategy.tell(point, Failure("error", "injected"))
                values.append(None)
                continue
            result = synthetic.evaluate(point)
            strategy.tell(point, result)
            values.append([result.metrics[m] for m in space.metrics])
    return asked, values


def hv_fraction(space, values):
    """The hypervolume of `values` as a fraction of the whole space's (log-normalised)."""
    every = np.array([[synthetic.metrics(p.config)[m] for m in space.metrics] for p in space])
    box = Box(tuple(every.min(axis=0)), tuple(every.max(axis=0) * 1.1))
    found = np.array([v for v in values if v is not None])
    return box.hypervolume(found[non_dominated(found)]) / box.hypervolume(every[non_dominated(every)])
