"""Normalisation over the last axis on the GPU, one thread per row, the row's statistics in
registers (local stages computed at the thread).

- `Softmax(shape)`: exp(x - max) / sum(exp(x - max)) along the last axis;
- `LayerNorm(shape, eps)`: (x - mean) / sqrt(var + eps) * gamma + beta, gamma and beta of the
  last axis' length (the biased variance, as ONNX's reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.gpu.base import GpuOp, Knobs, largest_divisor
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import GpuTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, max_reduce, placeholder, reduce_axis, sum


def row_launch(s: Schedule, stage: str, threads: int) -> str:
    """The row axes of `stage` (all but the last) over the grid: the last row axis split into
    blocks of up to `threads` threads, up to two more on blockIdx.y and blockIdx.z; the last axis
    stays a serial loop of each thread.  Returns the thread axis."""
    axes = list(s.stage(stage).leaves)
    rows = axes[:-1]
    if not rows or len(rows) > 3:
        raise ScheduleError(f"{stage}: {len(rows)} row axes; a row launch takes 1 to 3")
    extent = s.stage(stage).axes[len(rows) - 1].extent
    block, thread = s.split(stage, rows[-1], largest_divisor(extent, threads))
    for axis, tag in zip(reversed(rows[:-1]), ("blockIdx.y", "blockIdx.z"), strict=False):
        s.bind(stage, axis, tag)
    s.bind(stage, block, "blockIdx.x")
    s.bind(stage, thread, "threadIdx.x")
    return thread


def _lead(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[:-1]


@dataclass(frozen=True)
class Softmax(GpuOp):
    shape: tuple[int, ...]
    op: ClassVar[str] = "softmax"

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "float32", "data")
        n = self.shape[-1]
        k1, k2 = reduce_axis(n, "k"), reduce_axis(n, "k")
        top = compute(_lead(self.shape), lambda *i: max_reduce(x[(*i, k1)], k1), "top")
        total = compute(_lead(self.shape), lambda *i: sum(E.exp(x[(*i, k2)] - top[i]), k2), "total")
        out = compute(self.shape, lambda *i: E.exp(x[i] - top[i[:-1]]) / total[i[:-1]], "out")
        return {"data": x, "out": out}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        x = data.astype(np.float64)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)

    def space(self, target: GpuTarget) -> list[Knobs]:
        return [Knobs(threads=t) for t in (128, 64, 32)]

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        thread = row_launch(s, "out", knobs.threads)
        for stage in ("top", "total"):
            s.set_scope(stage, "local")
            s.compute_at(stage, "out", thread)
        return s


@dataclass(frozen=True)
class LayerNorm(GpuOp):
    shape: tuple[int, ...]
    eps: float = 1e-5
    op: ClassVar[str] = "layer_norm"

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "float32", "data")
        n = self.shape[-1]
        gamma, beta = placeholder((n,), "float32", "gamma"), placeholder((n,), "float32", "beta")
        k1, k2 = reduce_axis(n, "k"), reduce_axis(n, "k")
        inv = E.const(1.0 / n, "float32")
        mean = compute(_lead(self.shape), lambda *i: sum(x[(*i, k1)] * inv, k1), "mean")

        def dev(i: tuple[E.Expr, ...]) -> E.Expr:
            d = x[(*i, k2)] - mean[i]
            return d * d * inv

        var = compute(_lead(self.shape), lambda *i: sum(dev(i), k2), "var")
        eps = E.const(float(self.eps), "float32")

        def norm(*i: E.Expr) -> E.Expr:
            row = i[:-1]
            return (x[i] - mean[row]) * E.rsqrt(var[row] + eps) * gamma[i[-1]] + beta[i[-1]]

        return {"data": x, "gamma": gamma, "beta": beta, "out": compute(self.shape, norm, "out")}

    def reference(self, data: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:  # type: ignore[override]
        x = data.astype(np.float64)
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return ((x - mean) / np.sqrt(var + self.eps) * gamma + beta).astype(np.float32)

    def space(self, target: GpuTarget) -> list[Knobs]:
        return [Knobs(threads=t) for t in (128, 64, 32)]

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        thread = row_launch(s, "out", knobs.threads)
        for stage in ("mean", "var"):
            s.set_scope(stage, "local")
            s.compute_at(stage, "out", thread)
        return s


__all__ = ["LayerNorm", "Softmax", "row_launch"]
