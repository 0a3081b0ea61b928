"""The learned cost model: gradient-boosted trees over `compiler.tune.features`, trained online.

Cycles of different layers differ by orders of magnitude, so the target is normalised per
workload: `log2(best / cycles)` with `best` the fastest measured point of that workload (0 for
the best, negative for the rest).  A model trained on some layers then ranks the points of
another, which is what transfer needs.  The objective was chosen by measurement
(benchmarks/tune_objectives.py, numbers in the README): regression on this target against
regression on best/cycles (AutoTVM's 'reg') and LightGBM's lambdarank, on our exhaustive logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits

if TYPE_CHECKING:  # scikit-learn takes 2 s to import: every `codesign` command would pay it
    from sklearn.ensemble import HistGradientBoostingRegressor

OBJECTIVES = ("log", "ratio")


def targets(cycles: np.ndarray, groups: np.ndarray, objective: str = "log") -> np.ndarray:
    """Per-group normalised targets (higher is faster) of measured `cycles`."""
    y = np.empty(len(cycles), dtype=np.float64)
    for g in np.unique(groups):
        rows = groups == g
        best = cycles[rows].min()
        ratio = best / cycles[rows]
        y[rows] = np.log2(ratio) if objective == "log" else ratio
    return y


class CostModel:
    """Scores points (higher is predicted faster); `fit` on every trial so far."""

    def __init__(self, objective: str = "log", seed: int = 0, trees: int = 150) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
        self.objective, self.seed, self.trees = objective, seed, trees
        self.model: HistGradientBoostingRegressor | None = None

    def fit(self, x: np.ndarray, cycles: np.ndarray, groups: np.ndarray) -> CostModel:
        from sklearn.ensemble import HistGradientBoostingRegressor

        y = targets(cycles, groups, self.objective)
        model = HistGradientBoostingRegressor(
            max_iter=self.trees, learning_rate=0.1, max_leaf_nodes=15, min_samples_leaf=2,
            l2_regularization=1e-3, early_stopping=False, random_state=self.seed,
        )
        # One thread: the data is small (OpenMP start-up and spinning cost more than they
        # save), the pool's workers have the other cores, and results are then reproducible.
        with threadpool_limits(1):
            self.model = model.fit(x, y)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("the cost model is not trained")
        with threadpool_limits(1):
            return np.asarray(self.model.predict(x))
