"""Element-wise float32 functions on the host: tanh, hard sigmoid, hard swish, clip and relu.

tanh is straight-line code, so the loop vectorises (a call of libm's tanhf would not): Cephes'
tanhf, an odd polynomial x * (1 + x^2 P(x^2)) below |x| = 0.625 and sign(x) * (1 - 2 / (exp(2|x|)
+ 1)) above, with the inline exp of compiler.codegen.llvm.fmath.  Measured against float64 tanh
rounded to float32 over 2**20 points in [-12, 12]: within 1 ulp (the tests allow 2).  tanh(+-0)
is +-0, tanh(+-inf) is +-1, NaN stays NaN.

HardSigmoid is min(max(alpha * x + beta, 0), 1) and HardSwish x * HardSigmoid(x) with alpha 1/6,
beta 1/2 (ONNX), in float32 as numpy computes them (alpha and beta rounded to float32 first).

Clip is min(max(x, min), max) and Relu max(x, 0), bit for bit as the graph interpreter's
np.minimum(np.maximum(x, min), max) and np.maximum(x, 0): NaN stays NaN, a tie gives the bound
(so the sign of a zero too: Relu(-0) = +0), min above max gives max everywhere (ONNX); the bounds
are rounded to float32 first, either may be infinite (that side is then not computed), and a NaN
bound is refused (the interpreter runs such a node).  Each side is a compare and a select, not
llvm.maximum, whose -0 < +0 ordering differs from numpy's ties.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import HostOp, check_shape
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder

# Cephes tanhf: tanh(x) = x + x * z * P(z), z = x^2, for |x| < 0.625 (highest power first)
TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
TANH_SMALL = 0.625


def tanh_expr(x: E.Expr) -> E.Expr:
    """tanh of `x`, without branches: both forms are computed (the polynomial on x clamped to
    its interval, so neither overflows) and one is kept by multiplying with 0 or 1 (a select
    around loads would become a branch)."""
    z = E.fabs(x)
    sign = E.if_then_else(E.lt(x, 0.0), -1.0, 1.0)
    large = (1.0 - 2.0 / (E.exp(z * 2.0) + 1.0)) * sign  # exp overflows to inf: 1
    xs = E.minimum(E.maximum(x, -TANH_SMALL), TANH_SMALL)
    z2 = xs * xs
    p: E.Expr = E.const(TANH_POLY[0], "float32")
    for c in TANH_POLY[1:]:
        p = p * z2 + c
    small = xs * (1.0 + z2 * p)  # x * (...) rather than x + x*z2*p keeps the sign of zero
    # keep one: small * 1 + large * -0.0 below, small * 0 + large above (NaN: not below, and
    # large is NaN); -0.0 so that the sum keeps small's zero sign: tanh(-0) = -0 + -0 = -0
    below = E.lt(z, TANH_SMALL)
    return small * E.if_then_else(below, 1.0, 0.0) + large * E.if_then_else(below, -0.0, 1.0)


@dataclass(frozen=True)
class FloatUnary(HostOp):
    """An element-wise float32 function of one tensor: `expr` builds its loop body, `numpy` its
    reference; the loop over the last axis is vectorised."""

    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))

    def expr(self, x: E.Expr) -> E.Expr:
        raise NotImplementedError

    def numpy(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "float32", "data")
        return {"data": x, "out": compute(self.shape, lambda *i: self.expr(x[i]), "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        vectorize_loop(s, "out", s.stage("out").leaves[-1], self.shape[-1])
        return s

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return self.numpy(data)


@dataclass(frozen=True)
class Tanh(FloatUnary):
    op: ClassVar[str] = "tanh"

    def expr(self, x: E.Expr) -> E.Expr:
        return tanh_expr(x)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x.astype(np.float64)).astype(np.float32)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class HardSigmoid(FloatUnary):
    alpha: float = 0.2
    beta: float = 0.5
    op: ClassVar[str] = "hard_sigmoid"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("alpha", "beta"):
            value = float(getattr(self, name))
            if not np.isfinite(value):
                raise ValueError(f"{self.op}: {name} {value} is not finite")
            object.__setattr__(self, name, float(np.float32(value)))

    def expr(self, x: E.Expr) -> E.Expr:
        return hard_sigmoid_expr(x, self.alpha, self.beta)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return _hard_sigmoid(x.astype(np.float32), self.alpha, self.beta)


@dataclass(frozen=True)
class HardSwish(FloatUnary):
    op: ClassVar[str] = "hard_swish"

    def expr(self, x: E.Expr) -> E.Expr:
        return x * hard_sigmoid_expr(x, *SWISH)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float32)
        return x * _hard_sigmoid(x, *SWISH)  # type: ignore[no-any-return]


SWISH = (float(np.float32(1 / 6)), 0.5)  # HardSwish's alpha and beta, as float32 values


def hard_sigmoid_expr(x: E.Expr, alpha: float, beta: float) -> E.Expr:
    return E.minimum(E.maximum(x * alpha + beta, 0.0), 1.0)


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(x * np.float32(alpha) + np.float32(beta), 0, 1).astype(np.float32)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Clip(FloatUnary):
    """`min` and `max` are float bounds, either infinite (ONNX Clip's attributes after import)."""

    min: float = -math.inf
    max: float = math.inf
    op: ClassVar[str] = "clip"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("min", "max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
                raise ValueError(f"{self.op}: {name} must be a float, not {value!r}")
            if math.isnan(value):
                raise ValueError(f"{self.op}: {name} must be a number, not nan")
            with np.errstate(over="ignore"):  # beyond float32's range: infinite
                object.__setattr__(self, name, float(np.float32(value)))

    def expr(self, x: E.Expr) -> E.Expr:
        return clip_expr(x, self.min, self.max)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return _clip(x.astype(np.float32), self.min, self.max)


@dataclass(frozen=True)
class Relu(FloatUnary):
    op: ClassVar[str] = "relu"

    def expr(self, x: E.Expr) -> E.Expr:
        return clip_expr(x, 0.0, math.inf)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return _clip(x.astype(np.float32), 0.0, math.inf)


def clip_expr(x: E.Expr, low: float, high: float) -> E.Expr:
    """numpy's minimum(maximum(x, low), high): x <= low gives low (a tie too), NaN gives x; an
    infinite bound is left out (maximum(x, -inf) is x, -inf itself included)."""
    if low != -math.inf:
        x = E.if_then_else(E.le(x, low), E.const(low, "float32"), x)
    if high != math.inf:
        x = E.if_then_else(E.ge(x, high), E.const(high, "float32"), x)
    return x


def _clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    return np.minimum(np.maximum(x, np.float32(low)), np.float32(high))  # type: ignore[no-any-return]
