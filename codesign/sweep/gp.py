"""A small Gaussian process regressor: ARD Matern 5/2 kernel plus noise, hyperparameters by
maximum marginal likelihood (L-BFGS-B with the exact gradient).

Written here rather than taken from scikit-learn because a sweep refits one per objective every
batch: for the tens to hundreds of points a sweep trains on, scikit-learn's generic kernel
machinery spent ~2 s per fit in Python overhead; this one takes milliseconds.  Deterministic:
the optimiser starts from fixed points, no random restarts.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.optimize import minimize

SQRT5 = math.sqrt(5.0)
# Bounds of log(signal variance), log(length scale) per feature, log(noise variance), for
# features scaled to [0, 1] and targets standardised.
LOG_SIGNAL = (math.log(1e-2), math.log(1e2))
LOG_LENGTH = (math.log(0.05), math.log(50.0))
LOG_NOISE = (math.log(1e-6), math.log(0.5))


def _kernel_parts(diff2: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(K without noise, the common factor of its length-scale gradients, scaled squared
    differences) for pairwise squared differences `diff2` (n x n' x d)."""
    signal, lengths2 = math.exp(theta[0]), np.exp(2 * theta[1:-1])
    scaled = diff2 / lengths2
    r = np.sqrt(scaled.sum(axis=-1))
    decay = np.exp(-SQRT5 * r)
    k = signal * (1 + SQRT5 * r + 5.0 / 3.0 * r * r) * decay
    common = signal * 5.0 / 3.0 * (1 + SQRT5 * r) * decay  # dk/dlog(l_i) = common * scaled_i
    return k, common, scaled


class GaussianProcess:
    """Fit with `fit(x, y)` (x scaled to about [0, 1]); `predict(x)` gives mean and std of the
    latent function (noise excluded)."""

    def __init__(self) -> None:
        self.theta: np.ndarray | None = None

    def _nll(self, theta: np.ndarray, diff2: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        k, common, scaled = _kernel_parts(diff2, theta)
        noise = math.exp(theta[-1])
        n = len(y)
        try:
            chol = cholesky(k + (noise + 1e-10) * np.eye(n), lower=True)
        except np.linalg.LinAlgError:
            return 1e25, np.zeros_like(theta)
        alpha = cho_solve((chol, True), y)
        nll = 0.5 * y @ alpha + np.log(np.diag(chol)).sum() + 0.5 * n * math.log(2 * math.pi)
        w = np.outer(alpha, alpha) - cho_solve((chol, True), np.eye(n))
        grad = np.empty_like(theta)
        grad[0] = 0.5 * np.sum(w * k)
        grad[1:-1] = 0.5 * np.einsum("ij,ijk->k", w * common, scaled)
        grad[-1] = 0.5 * noise * np.trace(w)
        return float(nll), -grad

    def fit(self, x: np.ndarray, y: np.ndarray) -> GaussianProcess:
        self.x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        self.mean, self.scale = float(y.mean()), float(y.std()) or 1.0
        self.y = (y - self.mean) / self.scale
        d = self.x.shape[1]
        diff2 = (self.x[:, None, :] - self.x[None, :, :]) ** 2
        bounds = [LOG_SIGNAL] + [LOG_LENGTH] * d + [LOG_NOISE]
        best = None
        for length, noise in ((0.5, 1e-3), (2.0, 1e-2)):
            start = np.array([0.0] + [math.log(length)] * d + [math.log(noise)])
            found = minimize(self._nll, start, args=(diff2, self.y), jac=True, method="L-BFGS-B",
                             bounds=bounds, options={"maxiter": 200})
            if best is None or found.fun < best.fun:
                best = found
        assert best is not None
        self.theta = np.asarray(best.x)
        k, _, _ = _kernel_parts(diff2, self.theta)
        self.chol = cholesky(k + (math.exp(self.theta[-1]) + 1e-10) * np.eye(len(self.y)), lower=True)
        self.alpha = cho_solve((self.chol, True), self.y)
        return self

    def predict(self, x: np.ndarray, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) at the rows of `x`, in the targets' units (`chunk` rows at a time)."""
        assert self.theta is not None, "fit first"
        x = np.asarray(x, dtype=float)
        mean, std = np.empty(len(x)), np.empty(len(x))
        for start in range(0, len(x), chunk):
            block = x[start:start + chunk]
            k_new, _, _ = _kernel_parts((block[:, None, :] - self.x[None, :, :]) ** 2, self.theta)
            v = solve_triangular(self.chol, k_new.T, lower=True)
            mean[start:start + chunk] = k_new @ self.alpha
            var = math.exp(self.theta[0]) - np.sum(v * v, axis=0)
            std[start:start + chunk] = np.sqrt(np.maximum(var, 0.0))
        return mean * self.scale + self.mean, std * self.scale


__all__ = ["GaussianProcess"]
