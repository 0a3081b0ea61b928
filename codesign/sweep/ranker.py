"""A correction of the compiler's cycle estimate, learned from timing runs, to rank each
operator's candidates before measuring the best few.

The analytic estimate (`Conv2d.estimates`, `Dense.estimates`) ranks a space well overall, but
among its best few points it is often wrong by 10-25% in a structured way: it overlaps loads and
GEMMs of two virtual threads too pessimistically, it ignores the requests in flight, and it
counts one DMA latency per input channel block whatever the bus.  `Ranker` fits the log of
(timing cycles / estimate) with a ridge regression on features of the estimate's own terms
(compute and load cycles, steps, DMAs, bytes per step, threads, bus and requests in flight;
the loads when the DRAM latency of each DMA row's bursts bounds them, which the estimate does not
model and which decides the best of ResNet-18's strided 1x1 and deep 3x3 layers on cores with
few requests in flight; a residual epilogue),
from the candidates it was shown (sufficient statistics only: a few kilobytes), and ranks an
operator's best-estimated points by the corrected estimate.  Until it has seen `warm`
measurements it says so (`trained`), and `choose` measures more candidates.

A sweep's evaluation learns one ranker from a fixed set of calibration points before any point
is evaluated, and each point starts from a `copy()` of it (codesign/sweep/evaluate.py), so that
a point's chosen schedules do not depend on which points the same process evaluated before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.ops.accel import Conv2d, Dense
from compiler.ops.accel.common import overlapped

FEATURES = 26


def features(op: Any, grid: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray | None:
    """Features of the grid points `idx` of `op`'s space (None: an operator without them)."""
    if isinstance(op, Conv2d):
        terms = _conv_terms(op, {n: v[idx].astype(np.float64) for n, v in grid.items()})
    elif isinstance(op, Dense):
        terms = _dense_terms(op, {n: v[idx].astype(np.float64) for n, v in grid.items()})
    else:
        return None
    cfg = op.target.cfg
    threads, tiles, steps, acc, step_bytes, dmas, uops, bursts = terms
    bandwidth, latency = min(cfg.bus_bytes, cfg.dram_bytes_per_cycle), cfg.dram_latency_cycles
    compute = steps * (uops + 10) + tiles * acc * (op.spec.epilogue.alu_ops + 1)
    load = steps * (step_bytes / bandwidth + dmas * latency)
    many = threads > 1
    est = overlapped(compute, load, steps, threads)
    # the loads when the read bursts' latency, not the bus, bounds them: every row of a 2-D DMA
    # is its own bursts, and at most mem_inflight of them wait on the DRAM at once
    bursts_est = overlapped(compute, np.maximum(load, steps * bursts * latency / cfg.mem_inflight), steps,
                             threads)
    balance = np.log(compute / load)
    one = np.ones_like(est)
    residual = float(getattr(op.spec.epilogue, "residual", None) is not None) * one
    return np.stack([
        one, np.log(est), np.log(compute / est), np.log(load / est), balance, balance * many,
        np.abs(balance), np.abs(balance) * many, np.log(steps), np.log(tiles), np.log(dmas),
        np.log(step_bytes), (threads == 1) * one, (threads == 2) * one, (threads == 4) * one,
        np.log(cfg.bus_bytes) * one, np.log(cfg.mem_inflight) * one, np.log(uops), np.log(acc),
        isinstance(op, Dense) * one, np.log(step_bytes / bandwidth / dmas / latency),
        np.log(steps * dmas * latency / est), np.log(bursts_est / est), np.log(bursts_est / est) * many,
        residual, residual * np.log(acc),
    ], axis=1)


def _conv_terms(op: Conv2d, g: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """The terms of Conv2d.estimates at these points."""
    s, cfg = op.spec, op.target.cfg
    b, h, w, oc, ic = g["tile_b"], g["tile_h"], g["tile_w"], g["tile_oc"], g["tile_ic"]
    in_h = (h - 1) * (s.stride // op.row_step) + s.kernel
    in_w = (w - 1) * s.stride + s.kernel
    tiles = (op.nb / b) * (op.kb / oc) * (s.out_height / h) * (s.out_width / w)
    acc = b * oc * h * w
    step_bytes = b * ic * in_h * in_w * cfg.inp_elem_bytes + oc * ic * s.kernel**2 * cfg.wgt_elem_bytes
    burst_bytes = cfg.bus_bytes * cfg.max_burst_beats
    # a step's read bursts: one input row per image, channel block and input row; one weight row
    # per output channel block (+1 each: a row need not start on a burst boundary)
    bursts = (b * ic * in_h * (np.ceil(in_w * cfg.inp_elem_bytes / burst_bytes) + 1)
              + oc * (np.ceil(ic * s.kernel**2 * cfg.wgt_elem_bytes / burst_bytes) + 1))
    return (g["oc_threads"] * g["h_threads"], tiles, tiles * (op.cb / ic), acc, step_bytes, b * ic + 1,
            acc * ic * s.kernel**2, bursts)


def _dense_terms(op: Dense, g: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """The terms of Dense.estimates at these points."""
    cfg = op.target.cfg
    m, k, n = g["tile_m"], g["tile_k"], g["tile_n"]
    tiles = (op.mb / m) * (op.nb / n)
    step_bytes = m * k * cfg.inp_elem_bytes + n * k * cfg.wgt_elem_bytes
    dmas = np.full_like(m, 2.0)  # one for the input tile, one for the weights
    return (g["n_threads"] * g["m_threads"], tiles, tiles * (op.kb / k), m * n, step_bytes, dmas, m * n * k,
            dmas)


class Ranker:
    """The online correction (see the module doc): `observe` measured points, `order` candidates."""

    def __init__(self, *, ridge: float = 1.0, warm: int = 400) -> None:
        self.ridge, self.warm = ridge, warm
        self.gram = np.zeros((FEATURES, FEATURES))
        self.moment = np.zeros(FEATURES)
        self.samples = 0
        self._weights: np.ndarray | None = None

    @property
    def trained(self) -> bool:
        return self.samples >= self.warm

    def copy(self) -> Ranker:
        """A ranker that starts from what this one has learned; this one does not change."""
        other = Ranker(ridge=self.ridge, warm=self.warm)
        other.gram, other.moment, other.samples = self.gram.copy(), self.moment.copy(), self.samples
        other._weights = self._weights  # replaced, never changed in place
        return other

    def observe(self, x: np.ndarray, estimate: float, cycles: int) -> None:
        """One measured point: its features `x`, its estimate and its timing cycles."""
        self.gram += np.outer(x, x)
        self.moment += x * (np.log(cycles) - np.log(estimate))
        self.samples += 1
        self._weights = None

    def correction(self, x: np.ndarray) -> np.ndarray:
        """The predicted log(cycles / estimate) of rows `x` (zeros before any observation)."""
        if self.samples == 0:
            return np.zeros(len(x))
        if self._weights is None:
            penalty = self.ridge * np.eye(FEATURES)
            penalty[0, 0] = 0.0  # the intercept is not shrunk
            self._weights = np.linalg.solve(self.gram + penalty + 1e-9 * np.eye(FEATURES), self.moment)
        return x @ self._weights  # type: ignore[no-any-return]


__all__ = ["FEATURES", "Ranker", "features"]
