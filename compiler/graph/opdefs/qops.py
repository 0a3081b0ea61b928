"""Integer ops of quantized graphs, with exact numpy evaluators (the integer reference).

The contract the accelerator implements bit for bit:

- activations are int8, symmetric (zero point 0), one scale per tensor; weights int8 symmetric,
  one scale per output channel; biases int32 at scale in_scale * w_scale[k];
- requantization ("the epilogue") of an int32 value t, every step wrapping at 32 bits as the
  ALU does: t = wrap32(t + bias[k]); t = wrap32(t * mult[k]); if shift > 0:
  t = wrap32(t + 2**(shift - 1)); t = t >> shift (arithmetic); y = clip(t, clip_lo, clip_hi)
  as int8. mult / 2**shift approximates in_scale * w_scale[k] / out_scale;
- a QConv may take a fifth input, an int8 `residual` shaped like its output (a residual
  connection fused into the convolution): after the multiply, t = wrap32(t +
  wrap32(residual * mult_r)), then rounding, shift and clip as above;
- `out_scale` is informational (the scale the int8 output stands for); nothing evaluates it.

Ops: QConv, QGemm (per-channel bias and multiplier vectors, int32 constants), QAdd (residual
addition with two 16-bit immediate multipliers), QGlobalAvgPool (int32 sum, one immediate
multiplier), Quantize (float32 -> int8, round half to even, saturating) and Dequantize (int8 or
int32 -> float32). MaxPool, Relu, Flatten and Reshape run on int8 as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compiler.graph.ir import AttrValue, Value, attr_float, attr_int, attr_ints
from compiler.graph.opdefs.base import OPS, Attrs, AttrSpec, OpDef, TensorType, check, register

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT8_MIN, INT8_MAX = -128, 127
# Multipliers that are ALU immediates (QAdd, QGlobalAvgPool) are signed 16-bit.
IMM_MAX = (1 << 15) - 1
SHIFT_MAX = 31


def wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to the int32 range (two's complement), still as int64."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 31)) & ((1 << 32) - 1)) - (1 << 31)


def round_shift_clip(t: np.ndarray, shift: int, clip_lo: int, clip_hi: int) -> np.ndarray:
    """The epilogue's tail on int64-held int32 values: rounding add, arithmetic shift, clip -> int8."""
    if shift > 0:
        t = wrap32(t + (1 << (shift - 1))) >> shift
    return np.clip(t, clip_lo, clip_hi).astype(np.int8)


def requantize(
    acc: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    shift: int,
    clip_lo: int,
    clip_hi: int,
    axis: int = 1,
    residual: np.ndarray | None = None,
    mult_r: int = 0,
) -> np.ndarray:
    """The per-output-channel epilogue: int32 `acc` (channels on `axis`) -> int8.

    `bias` and `mult` are int32 vectors, one element per channel; `residual` (int8, shaped like
    `acc`) times `mult_r` is added after the multiply; every step wraps at 32 bits.
    """
    shape = [1] * acc.ndim
    shape[axis] = -1
    b = np.asarray(bias, np.int64).reshape(shape)
    m = np.asarray(mult, np.int64).reshape(shape)
    t = wrap32(wrap32(np.asarray(acc, np.int64) + b) * m)
    if residual is not None:
        t = wrap32(t + wrap32(residual.astype(np.int64) * mult_r))
    return round_shift_clip(t, shift, clip_lo, clip_hi)


def conv_acc(
    x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int], group: int, wrap: bool = True
) -> np.ndarray:
    """Exact integer convolution, wrapped to int32 unless `wrap` is False (held as int64).

    Computed as a float64 GEMM: every product of two int8 values is below 2**14 and every
    partial sum below K * 2**14 < 2**53, so each float64 operation is exact.
    """
    rank = x.ndim - 2
    attrs: dict[str, AttrValue] = {
        "strides": tuple(strides),
        "pads": tuple(pads),
        "dilations": (1,) * rank,
        "group": group,
    }
    (y,) = OPS["Conv"].evaluate([x.astype(np.float64), w.astype(np.float64)], attrs)
    acc = np.rint(y).astype(np.int64)
    return wrap32(acc) if wrap else acc


def gemm_acc(x: np.ndarray, w: np.ndarray, wrap: bool = True) -> np.ndarray:
    """Exact x[M,K] @ w[N,K]^T, wrapped to int32 unless `wrap` is False (held as int64); float64
    is exact (see conv_acc)."""
    acc = np.rint(x.astype(np.float64) @ w.astype(np.float64).T).astype(np.int64)
    return wrap32(acc) if wrap else acc


# -- shared checks -------------------------------------------------------------------------------


def _check_epilogue(attrs: Attrs) -> None:
    shift, lo, hi = attr_int(attrs, "shift"), attr_int(attrs, "clip_lo"), attr_int(attrs, "clip_hi")
    check(0 <= shift <= SHIFT_MAX, f"shift {shift} is not in [0, {SHIFT_MAX}]")
    check(
        INT8_MIN <= lo <= hi <= INT8_MAX,
        f"clip [{lo}, {hi}] is not an ordered range within [{INT8_MIN}, {INT8_MAX}]",
    )
    _check_scale(attrs, "out_scale")


def _check_scale(attrs: Attrs, name: str) -> None:
    scale = attr_float(attrs, name)
    check(math.isfinite(scale) and scale > 0, f"{name} {scale} must be finite and > 0")


def _check_int8(v: Value, what: str) -> None:
    check(v.dtype == "int8", f"{what} {v.name} has dtype {v.dtype}, expected int8")


def _check_vectors(values: Sequence[Value], channels: int) -> None:
    for v, what in zip(values, ("bias", "mult"), strict=True):
        check(v.is_const, f"{what} {v.name} must be a constant")
        check(v.dtype == "int32", f"{what} {v.name} has dtype {v.dtype}, expected int32")
        check(v.shape == (channels,), f"{what} {v.name} has shape {v.shape}, expected ({channels},)")


def _check_immediate(attrs: Attrs, name: str) -> None:
    value = attr_int(attrs, name)
    check(abs(value) <= IMM_MAX, f"{name} {value} does not fit a 16-bit immediate (|m| <= {IMM_MAX})")


_EPILOGUE = {
    "shift": AttrSpec("int", 0),
    "clip_lo": AttrSpec("int", INT8_MIN),
    "clip_hi": AttrSpec("int", INT8_MAX),
    "out_scale": AttrSpec("float", 1.0),
}


def _epilogue_args(attrs: Attrs) -> tuple[int, int, int]:
    return attr_int(attrs, "shift"), attr_int(attrs, "clip_lo"), attr_int(attrs, "clip_hi")


# -- QConv ---------------------------------------------------------------------------------------


def _qconv_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, w, bias, mult = values[:4]
    _check_int8(x, "input")
    _check_int8(w, "weight")
    check(w.is_const, f"weight {w.name} must be a constant")
    check(x.rank == 4 and w.rank == 4, f"QConv needs NCHW data and KCRS weights, not {x.shape}, {w.shape}")
    group = attr_int(attrs, "group")
    check(
        group >= 1 and x.shape[1] % group == 0 and w.shape[0] % group == 0,
        f"group {group} does not divide channels {x.shape[1]} and filters {w.shape[0]}",
    )
    check(
        w.shape[1] * group == x.shape[1],
        f"weight {w.shape} expects {w.shape[1] * group} input channels, input has {x.shape[1]}",
    )
    _check_vectors([bias, mult], w.shape[0])
    _check_epilogue(attrs)
    strides, pads = attr_ints(attrs, "strides"), attr_ints(attrs, "pads")
    check(len(strides) == 2 and min(strides) >= 1, f"strides {strides} must be two positive ints")
    check(len(pads) == 4 and min(pads) >= 0, f"pads {pads} must be four non-negative ints")
    out = []
    for i in range(2):
        room = x.shape[2 + i] + pads[i] + pads[i + 2] - w.shape[2 + i]
        check(room >= 0, f"kernel {w.shape[2:]} is larger than the padded input")
        out.append(room // strides[i] + 1)
    shape = (x.shape[0], w.shape[0], *out)
    mult_r = attr_int(attrs, "mult_r")
    check(INT32_MIN <= mult_r <= INT32_MAX, f"mult_r {mult_r} does not fit int32")
    if len(values) == 5:
        _check_int8(values[4], "residual")
        res = values[4]
        check(res.shape == shape, f"residual {res.name} has shape {res.shape}, the output {shape}")
    return [TensorType(shape, "int8")]


def _qconv(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, w, bias, mult = xs[:4]
    acc = conv_acc(x, w, attr_ints(attrs, "strides"), attr_ints(attrs, "pads"), attr_int(attrs, "group"))
    residual = xs[4] if len(xs) == 5 else None
    mult_r = attr_int(attrs, "mult_r")
    return [requantize(acc, bias, mult, *_epilogue_args(attrs), residual=residual, mult_r=mult_r)]


register(
    OpDef(
        "QConv",
        (4, 5),
        _qconv_rule,
        _qconv,
        "int8 convolution (any group count) + per-channel int32 bias, multiplier, [+ residual * mult_r], "
        "rounding shift, clip",
        {"strides": AttrSpec("ints"), "pads": AttrSpec("ints"), "group": AttrSpec("int", 1),
         "mult_r": AttrSpec("int", 0), **_EPILOGUE},
        foldable=False,
    )
)


# -- QGemm ---------------------------------------------------------------------------------------


def _qgemm_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, w, bias, mult = values
    _check_int8(x, "input")
    _check_int8(w, "weight")
    check(w.is_const, f"weight {w.name} must be a constant")
    check(x.rank == 2 and w.rank == 2, f"QGemm needs [M,K] data and [N,K] weights, not {x.shape}, {w.shape}")
    check(x.shape[1] == w.shape[1], f"QGemm inner dimensions {x.shape[1]} and {w.shape[1]} differ")
    _check_vectors([bias, mult], w.shape[0])
    _check_epilogue(attrs)
    return [TensorType((x.shape[0], w.shape[0]), "int8")]


def _qgemm(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, w, bias, mult = xs
    return [requantize(gemm_acc(x, w), bias, mult, *_epilogue_args(attrs))]


register(
    OpDef(
        "QGemm",
        (4, 4),
        _qgemm_rule,
        _qgemm,
        "int8 x[M,K] @ w[N,K]^T + per-channel int32 bias, multiplier, rounding shift, clip",
        _EPILOGUE,
        foldable=False,
    )
)


# -- QAdd ----------------------------------------------------------------------------------------


def _qadd_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    a, b = values
    _check_int8(a, "input")
    _check_int8(b, "input")
    check(a.shape == b.shape, f"QAdd of shapes {a.shape} and {b.shape} (no broadcasting)")
    _check_immediate(attrs, "mult_a")
    _check_immediate(attrs, "mult_b")
    _check_epilogue(attrs)
    return [TensorType(a.shape, "int8")]


def _qadd(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    a, b = (x.astype(np.int64) for x in xs)
    t = wrap32(wrap32(a * attr_int(attrs, "mult_a")) + wrap32(b * attr_int(attrs, "mult_b")))
    return [round_shift_clip(t, *_epilogue_args(attrs))]


register(
    OpDef(
        "QAdd",
        (2, 2),
        _qadd_rule,
        _qadd,
        "int8 a * mult_a + b * mult_b (same shapes), rounding shift, clip",
        {"mult_a": AttrSpec("int"), "mult_b": AttrSpec("int"), **_EPILOGUE},
        foldable=False,
    )
)


# -- QGlobalAvgPool ------------------------------------------------------------------------------


def _qgap_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    _check_int8(x, "input")
    check(x.rank == 4, f"QGlobalAvgPool needs NCHW data, not {x.shape}")
    _check_immediate(attrs, "mult")
    _check_epilogue(attrs)
    return [TensorType((x.shape[0], x.shape[1], 1, 1), "int8")]


def _qgap(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    total = wrap32(xs[0].astype(np.int64).sum(axis=(2, 3), keepdims=True))
    return [round_shift_clip(wrap32(total * attr_int(attrs, "mult")), *_epilogue_args(attrs))]


register(
    OpDef(
        "QGlobalAvgPool",
        (1, 1),
        _qgap_rule,
        _qgap,
        "int8 sum over H, W in int32, times mult, rounding shift, clip",
        {"mult": AttrSpec("int"), **_EPILOGUE},
        foldable=False,
    )
)


# -- Quantize / Dequantize -----------------------------------------------------------------------


def _quantize_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    check(x.dtype == "float32", f"Quantize of {x.dtype}, expected float32")
    _check_scale(attrs, "scale")
    return [TensorType(x.shape, "int8")]


def quantize_array(x: np.ndarray, scale: float) -> np.ndarray:
    """float32 -> int8: x / scale in float32, rounded half to even, saturated (the host kernel's rule)."""
    q = np.rint(np.asarray(x, np.float32) / np.float32(scale))
    return np.clip(q, INT8_MIN, INT8_MAX).astype(np.int8)


def _dequantize_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    check(x.dtype in ("int8", "int32"), f"Dequantize of {x.dtype}, expected int8 or int32")
    _check_scale(attrs, "scale")
    return [TensorType(x.shape, "float32")]


def dequantize_array(x: np.ndarray, scale: float) -> np.ndarray:
    """int8/int32 -> float32: float32(x) * float32(scale)."""
    return np.asarray(x).astype(np.float32) * np.float32(scale)


register(
    OpDef(
        "Quantize",
        (1, 1),
        _quantize_rule,
        lambda xs, a: [quantize_array(xs[0], attr_float(a, "scale"))],
        "float32 -> int8: saturate(round_half_even(x / scale)), zero point 0",
        {"scale": AttrSpec("float")},
        foldable=False,
    )
)
register(
    OpDef(
        "Dequantize",
        (1, 1),
        _dequantize_rule,
        lambda xs, a: [dequantize_array(xs[0], attr_float(a, "scale"))],
        "int8 or int32 -> float32: x * scale",
        {"scale": AttrSpec("float")},
        foldable=False,
    )
)

__all__ = ["conv_acc", "dequantize_array", "gemm_acc", "quantize_array", "requantize", "wrap32"]
