"""Normalisations and activations over float32 tensors of any rank: softmax and layer norm over
the last axis (ONNX Softmax opset >= 13, LayerNormalization with axis=-1), GELU in erf form.

Softmax is the numerically stable one: exp(x - max) / sum.  Layer norm is two-pass (mean, then
the mean of squared deviations), like ONNX's reference.  Per-row temporaries are computed at the
row loop, so they stay in the stack frame; the row reductions are vectorised (LLVM may then
reorder the float sums: results differ from a serial sum by rounding only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import HostOp, check_shape
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, max_reduce, placeholder, reduce_axis, sum


def _rows(s: Schedule, stages: tuple[str, ...], ndim: int,
          vectorize: tuple[tuple[str, str], ...]) -> Schedule:
    """Compute `stages` per row of "out" (its second-to-last axis) and vectorise the named
    reduction loops."""
    if ndim >= 2:
        for st in stages:
            s.compute_at(st, "out", f"i{ndim - 2}")
    for st, axis in vectorize:
        s.vectorize(st, axis)
    return s


@dataclass(frozen=True)
class Softmax(HostOp):
    """exp(x - max) / sum(exp(x - max)) along the last axis."""

    shape: tuple[int, ...]
    op: ClassVar[str] = "softmax"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))

    def tensors(self) -> dict[str, Tensor]:
        n = self.shape[-1]
        x = placeholder(self.shape, "float32", "data")
        k1, k2 = reduce_axis(n, "k"), reduce_axis(n, "k")
        rows = self.shape[:-1]
        top = compute(rows or (1,), lambda *i: max_reduce(x[_lead(i, rows) + (k1,)], k1), "top")
        e = compute(self.shape, lambda *i: E.exp(x[i] - top[_row(i, rows)]), "e")
        total = compute(rows or (1,), lambda *i: sum(e[_lead(i, rows) + (k2,)], k2), "total")
        out = compute(self.shape, lambda *i: e[i] / total[_row(i, rows)], "out")
        return {"data": x, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        reductions = (("top", "k"), ("total", "k"))
        return _rows(Schedule(ts["out"]), ("top", "e", "total"), len(self.shape), reductions)

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        x = data.astype(np.float64)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)  # type: ignore[no-any-return]


def _lead(index: tuple[E.Expr, ...], rows: tuple[int, ...]) -> tuple[E.Expr, ...]:
    """The row part of an index (all but the last axis; nothing for a 1-d input)."""
    return tuple(index[: len(rows)])


def _row(index: tuple[E.Expr, ...], rows: tuple[int, ...]) -> tuple[E.Expr, ...]:
    """Where the row of element `index` keeps its per-row temporaries (shape `rows`, or (1,)
    for a 1-d input)."""
    return _lead(index, rows) if rows else (E.const(0),)


@dataclass(frozen=True)
class LayerNorm(HostOp):
    """(x - mean) / sqrt(var + eps) * gamma (+ beta) along the last axis; gamma and beta have the
    last axis' length."""

    shape: tuple[int, ...]
    eps: float = 1e-5
    bias: bool = True
    op: ClassVar[str] = "layer_norm"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        if not (isinstance(self.eps, float | int) and self.eps >= 0 and math.isfinite(self.eps)):
            raise ValueError(f"{self.op}: eps must be a finite float >= 0, not {self.eps!r}")

    def tensors(self) -> dict[str, Tensor]:
        n, rows = self.shape[-1], self.shape[:-1]
        x = placeholder(self.shape, "float32", "data")
        gamma = placeholder((n,), "float32", "gamma")
        beta = placeholder((n,), "float32", "beta") if self.bias else None
        k1, k2 = reduce_axis(n, "k"), reduce_axis(n, "k")
        inv_n = 1.0 / n

        def shifted(i: tuple[E.Expr, ...]) -> E.Expr:
            """x minus its row's first element: the mean of these is small when the row's spread
            is, so float32 rounds it relative to the spread, not to |x| (shifted-data variance)."""
            return x[i] - x[(*i[:-1], E.const(0))]

        total = compute(rows or (1,), lambda *i: sum(shifted((*_lead(i, rows), k1.var)), k1), "total")

        def centred(i: tuple[E.Expr, ...]) -> E.Expr:
            return shifted(i) - total[_row(i, rows)] * inv_n

        dev = compute(rows or (1,), lambda *i: sum(_square(centred((*_lead(i, rows), k2.var))), k2), "dev")

        def normed(*i: E.Expr) -> E.Expr:
            scale = E.rsqrt(dev[_row(i, rows)] * inv_n + float(self.eps))
            y = centred(i) * scale * gamma[i[-1]]
            return y + beta[i[-1]] if beta is not None else y

        out = compute(self.shape, normed, "out")
        ins = {"data": x, "gamma": gamma} | ({"beta": beta} if beta is not None else {})
        return {**ins, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        return _rows(Schedule(ts["out"]), ("total", "dev"), len(self.shape), (("total", "k"), ("dev", "k")))

    def reference(self, data: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None) -> np.ndarray:  # type: ignore[override]
        x = data.astype(np.float64)
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        y = (x - mean) / np.sqrt(var + self.eps) * gamma.astype(np.float64)
        if beta is not None:
            y = y + beta.astype(np.float64)
        return y.astype(np.float32)  # type: ignore[no-any-return]


def _square(v: E.Expr) -> E.Expr:
    return v * v


def gelu_expr(x: E.Expr) -> E.Expr:
    """GELU of `x` in erf form, as the Gelu operator computes it (fused epilogues reuse it)."""
    return x * 0.5 * (1.0 + E.erf(x * math.sqrt(0.5)))


@dataclass(frozen=True)
class Gelu(HostOp):
    """0.5 * x * (1 + erf(x / sqrt(2))) element-wise (ONNX Gelu, approximate='none')."""

    shape: tuple[int, ...]
    op: ClassVar[str] = "gelu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "float32", "data")
        out = compute(self.shape, lambda *i: gelu_expr(x[i]), "out")
        return {"data": x, "out": out}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        x = data.astype(np.float64)
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(np.float32)  # type: ignore[no-any-return]
