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

qgemm and qconv2d also have the contract's precise requantization (`precise=True`, see
compiler.graph.opdefs.qops): two more int32 vector arguments clamp_lo, clamp_hi after mult, and

    t = wrap32(acc + bias[n]); t = min(max(t, clamp_lo[n]), clamp_hi[n])
    y = int8(clip((t * mult[n] + (1 << (shift - 1))) >> shift, clip_lo, clip_hi))

with the product and the rounding in int64, exact for any int32 operands (|t * mult| <= 2**62);
the accelerator's two 32-bit halves give the same value where the contract's checks hold, and
the host needs neither them nor the split.

Per-channel bias and multipliers are kernel arguments, so one kernel serves any weights of its
shape; the scalar multipliers of qadd and qglobal_avg_pool, the shift and the clip bounds are
constants of the kernel.  All arithmetic is int32 in the TE (LLVM's i32 wraps, nothing is
widened or saturated) but the precise product's, and the references compute in int64 and wrap
explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from compiler.ops.cpu.base import HostOp, check_gemm, check_int, check_shape
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Seeded per-channel vectors: biases of a realistic size, multipliers of both signs (positive
# ones for the precise mode), clamp bounds about as large as a convolution's typical sums.
BIAS_RANGE, MULT_RANGE, CLAMP_RANGE = (-(2**16), 2**16), (-(2**12), 2**12), (-(2**17), 2**17)


# -- the requantization, in TE and in numpy -----------------------------------------------------


class Requantizing(Protocol):
    """What the shared requantization reads of an operator (QGemm, QConv2d)."""

    op: ClassVar[str]

    @property
    def shift(self) -> int: ...

    @property
    def clip_lo(self) -> int: ...

    @property
    def clip_hi(self) -> int: ...

    @property
    def precise(self) -> bool: ...


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


def check_precise(op: Requantizing) -> None:
    """`op.precise` a bool (stored back as one); a precise op's shift at least 1, as its rounding
    adds 2**(shift - 1).  After check_requant."""
    if not isinstance(op.precise, bool | np.bool_):
        raise ValueError(f"{op.op}: precise must be a bool, not {op.precise!r}")
    object.__setattr__(op, "precise", bool(op.precise))
    if op.precise and op.shift < 1:
        raise ValueError(f"{op.op}: precise requantization needs shift >= 1 (it rounds by "
                         f"2**(shift - 1)), not {op.shift}")


def requant_expr(t: E.Expr, shift: int, clip_lo: int, clip_hi: int) -> E.Expr:
    """int32 `t` rounded, shifted, clipped and cast to int8 (int32 adds wrap)."""
    if shift:
        t = (t + (1 << (shift - 1))) >> shift
    return E.cast("int8", E.minimum(E.maximum(t, clip_lo), clip_hi))


def precise_expr(t: E.Expr, mult: E.Expr, clamp_lo: E.Expr, clamp_hi: E.Expr, shift: int, clip_lo: int,
                 clip_hi: int) -> E.Expr:
    """int32 `t` clamped to [clamp_lo, clamp_hi], times `mult` and rounded in int64 (exact),
    shifted (shift >= 1), clipped and cast to int8."""
    t = E.minimum(E.maximum(t, clamp_lo), clamp_hi)
    y = (E.cast("int64", t) * E.cast("int64", mult) + (1 << (shift - 1))) >> shift
    return E.cast("int8", E.minimum(E.maximum(y, clip_lo), clip_hi))


def epilogue_expr(op: Requantizing, ins: dict[str, Tensor], acc: E.Expr, ch: E.Expr) -> E.Expr:
    """The requantization of int32 `acc` of output channel `ch` by `op` (shift, clip bounds,
    precise or not) with the vectors among `ins` (bias, mult, and clamp_lo, clamp_hi if precise)."""
    shift, lo, hi = op.shift, op.clip_lo, op.clip_hi
    t = acc + ins["bias"][ch]
    if op.precise:
        return precise_expr(t, ins["mult"][ch], ins["clamp_lo"][ch], ins["clamp_hi"][ch], shift, lo, hi)
    return requant_expr(t * ins["mult"][ch], shift, lo, hi)


def vector_inputs(channels: int, precise: bool) -> dict[str, Tensor]:
    """The per-channel int32 vector arguments: bias, mult, and clamp_lo, clamp_hi if precise."""
    names = ("bias", "mult", "clamp_lo", "clamp_hi") if precise else ("bias", "mult")
    return {name: placeholder((channels,), "int32", name) for name in names}


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


def epilogue_reference(
    op: Requantizing, acc: np.ndarray, vectors: Sequence[np.ndarray], axis: int
) -> np.ndarray:
    """numpy: `op`'s requantization of int32-range int64 `acc` (channels on `axis`) with
    `vectors` (bias, mult, and clamp_lo, clamp_hi if op.precise), the steps of epilogue_expr."""
    shape = [1] * acc.ndim
    shape[axis] = -1
    bias, mult, *clamps = (np.asarray(v, np.int64).reshape(shape) for v in vectors)
    t = wrap32(acc + bias)
    if not op.precise:
        return requant_reference(wrap32(t * mult), op.shift, op.clip_lo, op.clip_hi)
    t = np.minimum(np.maximum(t, clamps[0]), clamps[1])
    y = (t * mult + (1 << (op.shift - 1))) >> op.shift  # |t * mult| <= 2**62: int64 is exact
    return requant_reference(y, 0, op.clip_lo, op.clip_hi)  # clipped, the low 8 bits


def random_weighted_inputs(
    seed: int, shape: tuple[int, ...], weight_shape: tuple[int, ...], precise: bool = False
) -> list[np.ndarray]:
    """Seeded int8 data and weights, and int32 bias and multiplier vectors, one element per
    output channel (weight_shape[0]): the inputs of a quantized convolution or dense layer; if
    `precise`, positive multipliers and ordered clamp bounds too."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, shape).astype(np.int8)
    weight = rng.integers(-128, 128, weight_shape).astype(np.int8)
    channels = weight_shape[0]
    bias = rng.integers(*BIAS_RANGE, channels, endpoint=True).astype(np.int32)
    if not precise:
        mult = rng.integers(*MULT_RANGE, channels, endpoint=True).astype(np.int32)
        return [data, weight, bias, mult]
    mult = rng.integers(1, MULT_RANGE[1], channels, endpoint=True).astype(np.int32)
    clamp_lo, clamp_hi = np.sort(rng.integers(*CLAMP_RANGE, (2, channels), endpoint=True), axis=0)
    return [data, weight, bias, mult, clamp_lo.astype(np.int32), clamp_hi.astype(np.int32)]


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
    """int8[M, K] x int8[N, K]^T -> int8[M, N] with per-output bias and multiplier vectors (and,
    `precise`, clamp_lo and clamp_hi vectors after them).

    The schedule computes each output's dot product over K as one vectorised reduction (the
    weight rows are contiguous, so nothing is transposed: for M = 1 a transpose would cost as
    much as the product)."""

    shape: tuple[int, int]
    weight_shape: tuple[int, int]
    shift: int = 0
    clip_lo: int = -128
    clip_hi: int = 127
    precise: bool = False
    op: ClassVar[str] = "qgemm"

    def __post_init__(self) -> None:
        check_gemm(self)
        check_requant(self)
        check_precise(self)

    def tensors(self) -> dict[str, Tensor]:
        (m, k), n = self.shape, self.weight_shape[0]
        data = placeholder((m, k), "int8", "data")
        weight = placeholder((n, k), "int8", "weight")
        ins = {"data": data, "weight": weight, **vector_inputs(n, self.precise)}
        rk = reduce_axis(k, "rk")
        acc = compute((m, n), lambda i, j: sum(_i32(data[i, rk]) * _i32(weight[j, rk]), rk), "acc")
        out = compute((m, n), lambda i, j: epilogue_expr(self, ins, acc[i, j], j), "out")
        return {**ins, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_at("acc", "out", "j")  # one int32 in the stack: a register
        vectorize_loop(s, "acc", "rk", self.shape[1])
        return s

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        return random_weighted_inputs(seed, self.shape, self.weight_shape, self.precise)

    def reference(self, data: np.ndarray, weight: np.ndarray, *vectors: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """`vectors`: bias and mult, and clamp_lo and clamp_hi if precise."""
        acc = wrap32(data.astype(np.int64) @ weight.astype(np.int64).T)
        return epilogue_reference(self, acc, vectors, axis=1)


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
            total[b, ch] * self.mult, self.shift, self.clip_lo, self.clip_hi), "out")
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
