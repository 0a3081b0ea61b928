"""The quantizer's int8 operators on the host: QGemm, QAdd, QGlobalAvgPool (QConv is in qconv),
with the accelerator's requantization, exactly.

Every operator ends in the same integer requantization of an int32 value t, each step wrapping
at 32 bits as the accumulator does:

    if shift > 0: t = wrap32(t + (1 << (shift - 1)))      round half up
    t = t >> shift                                          arithmetic
    y = int8(clip(t, clip_lo, clip_hi))                     the cast keeps the low 8 bits

- qgemm(data int8[M, K], weight int8[N, K], bias int32[N], mult int32[N]) -> int8[M, N]:
  t = wrap32(wrap32(sum_k data[m, k] * weight[n, k] + bias[n]) * mult[n]), requantized;
- qadd(a int8[S], b int8[S]) -> int8[S]: t = wrap32(wrap32(a * mult_a) + wrap32(b * mult_b));
- qglobal_avg_pool(data int8[N, C, H, W]) -> int8[N, C, 1, 1]: t = wrap32(sum_hw data * mult).

Per-channel bias and multipliers are kernel arguments, so one kernel serves any weights of its
shape; the scalar multipliers of qadd and qglobal_avg_pool, the shift and the clip bounds are
constants of the kernel.  All arithmetic is int32 in the TE (LLVM's i32 wraps, nothing is
widened or saturated), and the references compute in int64 and wrap explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.host.base import HostOp, check_int, check_shape
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Seeded per-channel vectors: biases of a realistic size, multipliers of both signs.
BIAS_RANGE, MULT_RANGE = (-(2**16), 2**16), (-(2**12), 2**12)


# -- the requantization, in TE and in numpy -----------------------------------------------------


def check_requant(op: HostOp, *mults: str) -> None:
    """`op`'s shift in [0, 31], clip bounds int32 values with clip_lo <= clip_hi and the scalar
    multipliers named `mults` int32 values, each stored back as a Python int."""
    name = op.op
    limits = {"shift": (0, 31), "clip_lo": (INT32_MIN, INT32_MAX), "clip_hi": (INT32_MIN, INT32_MAX)}
    limits |= {m: (INT32_MIN, INT32_MAX) for m in mults}
    for field, (low, high) in limits.items():
        object.__setattr__(op, field, check_int(name, field, getattr(op, field), low, high))
    lo, hi = op.clip_lo, op.clip_hi  # type: ignore[attr-defined]
    if lo > hi:
        raise ValueError(f"{name}: clip_lo {lo} is above clip_hi {hi}")


def requant_expr(t: E.Expr, shift: int, clip_lo: int, clip_hi: int) -> E.Expr:
    """int32 `t` rounded, shifted, clipped and cast to int8 (int32 adds wrap)."""
    if shift:
        t = (t + (1 << (shift - 1))) >> shift
    return E.cast("int8", E.minimum(E.maximum(t, clip_lo), clip_hi))


def wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values reduced to int32's two's-complement range (still int64)."""
    return ((x.astype(np.int64) + 2**31) % 2**32) - 2**31  # type: ignore[no-any-return]


def requant_reference(t: np.ndarray, shift: int, clip_lo: int, clip_hi: int) -> np.ndarray:
    """numpy: int32-range int64 `t` -> int8, the steps of `requant_expr`."""
    t = t.astype(np.int64)
    if shift:
        t = wrap32(t + (1 << (shift - 1))) >> shift  # numpy's >> on signed ints is arithmetic
    clipped = np.minimum(np.maximum(t, clip_lo), clip_hi)
    return (((clipped + 128) % 256) - 128).astype(np.int8)  # the low 8 bits, as a cast keeps


def random_weighted_inputs(
    seed: int, shape: tuple[int, ...], weight_shape: tuple[int, ...]
) -> list[np.ndarray]:
    """Seeded int8 data and weights, and int32 bias and multiplier vectors, one element per
    output channel (weight_shape[0]): the inputs of a quantized convolution or dense layer."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, shape).astype(np.int8)
    weight = rng.integers(-128, 128, weight_shape).astype(np.int8)
    channels = weight_shape[0]
    bias = rng.integers(*BIAS_RANGE, channels, endpoint=True).astype(np.int32)
    mult = rng.integers(*MULT_RANGE, channels, endpoint=True).astype(np.int32)
    return [data, weight, bias, mult]


def vectorize_loop(s: Schedule, stage: str, axis: str, extent: int) -> None:
    """Vectorise a loop of at least 4 iterations (given 2 or 3, LLVM may fail to, and then says
    so on stderr)."""
    if extent >= 4:
        s.vectorize(stage, axis)


def _i32(x: E.Expr) -> E.Expr:
    return E.cast("int32", x)


# -- QGemm -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QGemm(HostOp):
    """int8[M, K] x int8[N, K]^T -> int8[M, N] with per-output bias and multiplier vectors.

    The schedule computes each output's dot product over K as one vectorised reduction (the
    weight rows are contiguous, so nothing is transposed: for M = 1 a transpose would cost as
    much as the product)."""

    shape: tuple[int, int]
    weight_shape: tuple[int, int]
    shift: int = 0
    clip_lo: int = -128
    clip_hi: int = 127
    op: ClassVar[str] = "qgemm"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, rank=2))
        object.__setattr__(self, "weight_shape", check_shape(self.op, self.weight_shape, rank=2))
        if self.weight_shape[1] != self.shape[1]:
            raise ValueError(f"{self.op}: weight {self.weight_shape} does not take inputs of "
                             f"{self.shape[1]} features (data {self.shape})")  # fmt: skip
        check_requant(self)

    def tensors(self) -> dict[str, Tensor]:
        (m, k), n = self.shape, self.weight_shape[0]
        data = placeholder((m, k), "int8", "data")
        weight = placeholder((n, k), "int8", "weight")
        bias, mult = placeholder((n,), "int32", "bias"), placeholder((n,), "int32", "mult")
        rk = reduce_axis(k, "rk")
        acc = compute((m, n), lambda i, j: sum(_i32(data[i, rk]) * _i32(weight[j, rk]), rk), "acc")
        out = compute((m, n), lambda i, j: requant_expr((acc[i, j] + bias[j]) * mult[j], self.shift,
                                                        self.clip_lo, self.clip_hi), "out")  # fmt: skip
        return {"data": data, "weight": weight, "bias": bias, "mult": mult, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_at("acc", "out", "j")  # one int32 in the stack: a register
        vectorize_loop(s, "acc", "rk", self.shape[1])
        return s

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        return random_weighted_inputs(seed, self.shape, self.weight_shape)

    def reference(self, data: np.ndarray, weight: np.ndarray, bias: np.ndarray,  # type: ignore[override]
                  mult: np.ndarray) -> np.ndarray:  # fmt: skip
        acc = wrap32(data.astype(np.int64) @ weight.astype(np.int64).T)
        t = wrap32(wrap32(acc + bias.astype(np.int64)) * mult.astype(np.int64))
        return requant_reference(t, self.shift, self.clip_lo, self.clip_hi)


# -- QAdd ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QAdd(HostOp):
    """a * mult_a + b * mult_b, requantized: int8 tensors of one shape -> int8."""

    shape: tuple[int, ...]
    mult_a: int
    mult_b: int
    shift: int = 0
    clip_lo: int = -128
    clip_hi: int = 127
    op: ClassVar[str] = "qadd"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        check_requant(self, "mult_a", "mult_b")

    def tensors(self) -> dict[str, Tensor]:
        a, b = placeholder(self.shape, "int8", "a"), placeholder(self.shape, "int8", "b")

        def body(*i: E.Expr) -> E.Expr:
            t = _i32(a[i]) * self.mult_a + _i32(b[i]) * self.mult_b
            return requant_expr(t, self.shift, self.clip_lo, self.clip_hi)

        return {"a": a, "b": b, "out": compute(self.shape, body, "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        vectorize_loop(s, "out", s.stage("out").leaves[-1], self.shape[-1])
        return s

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[override]
        t = wrap32(wrap32(a.astype(np.int64) * self.mult_a) + wrap32(b.astype(np.int64) * self.mult_b))
        return requant_reference(t, self.shift, self.clip_lo, self.clip_hi)


# -- QGlobalAvgPool --------------------------------------------------------------------------------


@dataclass(frozen=True)
class QGlobalAvgPool(HostOp):
    """int8[N, C, H, W] -> int8[N, C, 1, 1]: each plane's int32 sum times `mult`, requantized
    (the 1 / (H*W) of the average is folded into mult and shift by the quantizer)."""

    shape: tuple[int, int, int, int]
    mult: int
    shift: int = 0
    clip_lo: int = -128
    clip_hi: int = 127
    op: ClassVar[str] = "qglobal_avg_pool"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, rank=4))
        check_requant(self, "mult")

    def tensors(self) -> dict[str, Tensor]:
        n, c, h, w = self.shape
        data = placeholder(self.shape, "int8", "data")
        ry, rx = reduce_axis(h, "ry"), reduce_axis(w, "rx")
        total = compute((n, c), lambda b, ch: sum(_i32(data[b, ch, ry, rx]), [ry, rx]), "total")
        out = compute((n, c, 1, 1), lambda b, ch, y, x: requant_expr(
            total[b, ch] * self.mult, self.shift, self.clip_lo, self.clip_hi), "out")  # fmt: skip
        return {"data": data, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_at("total", "out", "ch")
        flat = s.fuse("total", "ry", "rx")  # one contiguous run of H*W bytes
        vectorize_loop(s, "total", flat, self.shape[2] * self.shape[3])
        return s

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        total = wrap32(data.astype(np.int64).sum(axis=(2, 3), keepdims=True))
        return requant_reference(wrap32(total * self.mult), self.shift, self.clip_lo, self.clip_hi)
