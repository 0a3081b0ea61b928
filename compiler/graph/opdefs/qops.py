"""Integer ops of quantized graphs, with exact numpy evaluators (the integer reference).

The contract the accelerator implements bit for bit:

- activations are int8, symmetric (zero point 0), one scale per tensor; weights int8 symmetric,
  one scale per output channel; biases int32 at scale in_scale * w_scale[k]. The ops know no
  zero points or per-channel activation scales: where the quantizer uses them (compiler.quant.
  plan: unsigned and per-channel activations), they are folded into biases, multipliers,
  clip bounds and weights, and the integer ops below are unchanged;
- requantization ("the epilogue") of an int32 value t, every step wrapping at 32 bits as the
  ALU does: t = wrap32(t + bias[k]); t = wrap32(t * mult[k]); if shift > 0:
  t = wrap32(t + 2**(shift - 1)); t = t >> shift (arithmetic); y = clip(t, clip_lo, clip_hi)
  as int8. mult / 2**shift approximates in_scale * w_scale[k] / out_scale;
- a QConv may take a fifth input, an int8 `residual` shaped like its output (a residual
  connection fused into the convolution): after the multiply, t = wrap32(t +
  wrap32(residual * mult_r)), then rounding, shift and clip as above;
- precise requantization (QConv/QGemm with attribute `split` k > 0 and two more int32 constant
  vectors `clamp_lo`, `clamp_hi`, the inputs after `mult`; no residual): t = wrap32(t +
  bias[k]); t = clamp(t, clamp_lo[k], clamp_hi[k]); y = clip((t * mult[k] + 2**(shift - 1)) >>
  shift, clip_lo, clip_hi), computed exactly. The clamp stops t where the output saturates
  anyway, so the multiplier can keep 31 bits; the accelerator computes the product in 32-bit
  steps as m = mh * 2**k + ml (mh = mult >> k, ml = mult mod 2**k): y = (t * mh + 2**(shift -
  k - 1) + ((t * ml) >> k)) >> (shift - k), the same value by floor identities. The checks
  (`precise_checks`) make that exact: mult > 0, clamp_lo <= clamp_hi, 1 <= k < shift, no step
  of the 32-bit form leaves int32 for t in [clamp_lo, clamp_hi], and the outputs at both clamp
  bounds lie within [clip_lo, clip_hi] (so the final clip never changes a value);
- a QConv's padding reads `pad_value` (an int8, default 0): the code of an unsigned input's zero
  is -128 (compiler.quant.plan). The accelerator pads with zeros only, so a QConv with
  padding and another pad value runs on the host;
- `out_scale` is informational (the scale the int8 output stands for); nothing evaluates it.

Ops: QConv, QGemm (per-channel bias and multiplier vectors, int32 constants), QAdd (residual
addition with two int32 multipliers: ALU immediates up to 16 bits, vector operands beyond),
QGlobalAvgPool (int32 sum, one immediate multiplier), Quantize (float32 -> int8, round half to
even, plus `zero_point`: 0, or -128 where an unsigned value enters from float; saturating) and
Dequantize (int8 or int32 -> float32). MaxPool, Relu, Flatten and Reshape run on int8 as they are.

QConv's evaluator runs depthwise and pointwise layers through `qconv_fused` (the same values,
computed a cache-sized block at a time) and every other shape through `qconv_acc` and the
blocked epilogue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compiler.graph.ir import AttrValue, Value, attr_float, attr_int, attr_ints
from compiler.graph.opdefs.base import OPS, Attrs, AttrSpec, OpDef, TensorType, check, register
from compiler.graph.opdefs.qconv_fused import Epilogue, fused_qconv

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT8_MIN, INT8_MAX = -128, 127
# Multipliers that are ALU immediates (QAdd, QGlobalAvgPool) are signed 16-bit.
IMM_MAX = (1 << 15) - 1
SHIFT_MAX = 31


def wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to the int32 range (two's complement), still as int64."""
    return np.asarray(x, dtype=np.int64).astype(np.int32).astype(np.int64)  # the cast wraps: 2x faster


def round_shift_clip(t: np.ndarray, shift: int, clip_lo: int, clip_hi: int) -> np.ndarray:
    """The epilogue's tail on int64-held int32 values: rounding add, arithmetic shift, clip -> int8."""
    if shift > 0:  # in int32, whose sum wraps as wrap32 does
        t = np.asarray(t).astype(np.int32)
        t += np.int32(1 << (shift - 1))
        t >>= shift
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
    # int32 arithmetic wraps every sum and product to 32 bits, two's complement, as the ALU does:
    # the same values as wrap32 of each exact int64 step, at a third of the memory traffic
    t = np.asarray(acc).astype(np.int32)  # wraps an unwrapped (int64) accumulator the same way
    t += np.asarray(bias, np.int64).astype(np.int32).reshape(shape)
    t *= np.asarray(mult, np.int64).astype(np.int32).reshape(shape)
    if residual is not None:
        r = residual.astype(np.int32)
        r *= np.int64(mult_r).astype(np.int32)
        t += r
    return round_shift_clip(t, shift, clip_lo, clip_hi)


def precise_requantize(
    acc: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    clamp_lo: np.ndarray,
    clamp_hi: np.ndarray,
    shift: int,
    clip_lo: int,
    clip_hi: int,
    axis: int = 1,
) -> np.ndarray:
    """The precise per-output-channel epilogue (see the module doc): int32 `acc` -> int8,
    clip((clamp(wrap32(acc + bias), clamp_lo, clamp_hi) * mult + 2**(shift - 1)) >> shift)."""
    shape = [1] * acc.ndim
    shape[axis] = -1
    b, m, lo_t, hi_t = (np.asarray(v, np.int64).reshape(shape) for v in (bias, mult, clamp_lo, clamp_hi))
    t = np.clip(wrap32(np.asarray(acc, np.int64) + b), lo_t, hi_t)
    y = (t * m + (1 << (shift - 1))) >> shift
    return np.clip(y, clip_lo, clip_hi).astype(np.int8)


def precise_steps(t: np.ndarray, mult: np.ndarray, shift: int, split: int) -> list[np.ndarray]:
    """Every intermediate of the 32-bit two-part multiply of `t` (int64, unwrapped), in ALU
    order: t * mh, (t * ml) >> k, their sum, + 2**(shift - k - 1), and the output (>> shift - k)."""
    m = np.asarray(mult, np.int64)
    t = np.asarray(t, np.int64)
    high, low = t * (m >> split), (t * (m & ((1 << split) - 1))) >> split
    total = high + low + (1 << (shift - split - 1))
    return [high, t * (m & ((1 << split) - 1)), high + low, total, total >> shift - split]


def precise_checks(
    mult: np.ndarray,
    clamp_lo: np.ndarray,
    clamp_hi: np.ndarray,
    shift: int,
    split: int,
    clip: tuple[int, int],
) -> str | None:
    """Why these precise-requantization parameters are not exact in 32-bit steps, or None."""
    m, lo_t, hi_t = (np.asarray(v, np.int64) for v in (mult, clamp_lo, clamp_hi))
    if not 1 <= split < shift:
        return f"split {split} is not in [1, shift {shift})"
    if (m <= 0).any():
        return f"precise requantization needs positive multipliers, not {int(m.min())}"
    if (lo_t > hi_t).any():
        k = int(np.argmax(lo_t > hi_t))
        return f"clamp [{int(lo_t[k])}, {int(hi_t[k])}] of channel {k} is not ordered"
    for t in (lo_t, hi_t):  # every step is monotone in t (mh, ml >= 0): its extremes are at the bounds
        *steps, out = precise_steps(t, m, shift, split)
        for step in steps:
            bad = (step < INT32_MIN) | (step > INT32_MAX)
            if bad.any():
                k = int(np.argmax(bad))
                return (f"channel {k}: the 32-bit multiply of t = {int(t[k])} by {int(m[k])} wraps "
                        f"(split {split})")
        bad = (out < clip[0]) | (out > clip[1])
        if bad.any():
            k = int(np.argmax(bad))
            return f"channel {k}: clamp bound {int(t[k])} gives {int(out[k])}, outside the clip {clip}"
    return None


def conv_acc(
    x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int], group: int, wrap: bool = True,
    dtype: type = np.int64,
) -> np.ndarray:
    """Exact integer convolution, wrapped to int32 unless `wrap` is False (held as int64), of
    `dtype` (int64, or int32 for a wrapped one: the same values at half the memory).

    Computed as float32 GEMMs over chunks of input channels of at most EXACT_F32_TERMS
    products per output (see `_exact_parts`); a grouped convolution with more products per
    group than that as one float64 GEMM (every partial sum below K * 2**14 < 2**53).
    """
    rank = x.ndim - 2
    attrs: dict[str, AttrValue] = {
        "strides": tuple(strides),
        "pads": tuple(pads),
        "dilations": (1,) * rank,
        "group": group,
    }
    per_channel = math.prod(w.shape[2:])
    if group == 1:
        parts = _exact_parts(w.shape[1], per_channel)
    else:  # chunks would split the groups
        exact32 = w.shape[1] * per_channel <= EXACT_F32_TERMS
        parts = [(slice(None), np.float32 if exact32 else np.float64)]
    if group == 1 and w.shape[2:] == (1,) * rank and not any(pads):  # pointwise: one GEMM per chunk
        x = x[(slice(None), slice(None), *(slice(None, None, s) for s in strides))]
        rows = x.reshape(x.shape[0], x.shape[1], -1)
        fits = wrap and _within_int32(x, w, w.shape[1])
        kind = dtype if fits else np.int64
        wk = w.reshape(w.shape[0], -1)
        sums: list[np.ndarray] = [(wk[:, c].astype(t) @ rows[:, c].astype(t)).astype(kind) for c, t in parts]
        acc = _total(sums).reshape(x.shape[0], w.shape[0], *x.shape[2:])
        return _wrapped(acc, wrap and not fits, dtype)
    conv = OPS["Conv"].evaluate
    fits = wrap and _within_int32(x, w, w.shape[1] * per_channel)
    kind = dtype if fits else np.int64
    sums = [conv([x[:, c].astype(t), w[:, c].astype(t)], attrs)[0].astype(kind) for c, t in parts]
    return _wrapped(_total(sums), wrap and not fits, dtype)


def _wrapped(acc: np.ndarray, wrap: bool, dtype: type) -> np.ndarray:
    """`acc` wrapped to int32 if `wrap`, as `dtype` (int32 only holds wrapped values: where
    nothing wraps, every partial sum fits int32 and the chunks were summed in it)."""
    acc = wrap32(acc) if wrap else acc
    return acc.astype(dtype, copy=False)


def _total(sums: list[np.ndarray]) -> np.ndarray:
    """The sum of the chunks' accumulators (one chunk: itself, not a stacked copy reduced)."""
    return sums[0] if len(sums) == 1 else np.add.reduce(sums)


def _within_int32(x: np.ndarray, w: np.ndarray, terms: int) -> bool:
    """Whether every sum of `terms` products of `x` and `w` elements lies inside int32 (int8
    operands: each product is at most 2**14 in size), so that wrapping it changes nothing."""
    return x.dtype == np.int8 and w.dtype == np.int8 and terms << 14 < 1 << 31


def gemm_acc(x: np.ndarray, w: np.ndarray, wrap: bool = True) -> np.ndarray:
    """Exact x[M,K] @ w[N,K]^T, wrapped to int32 unless `wrap` is False (held as int64), as
    float32 GEMMs over chunks of K (see `_exact_parts`)."""
    parts = _exact_parts(x.shape[1], 1)
    acc = np.add.reduce([(x[:, k].astype(t) @ w[:, k].astype(t).T).astype(np.int64) for k, t in parts])
    return wrap32(acc) if wrap and not _within_int32(x, w, x.shape[1]) else acc


# float32 holds every integer up to 2**24: a sum of at most EXACT_F32_TERMS products of two int8
# values (each |p| <= 2**14) stays exact in whatever order BLAS adds them, and float32 GEMMs
# are twice as fast as float64 ones.
EXACT_F32_TERMS = 1 << 10


def _exact_parts(channels: int, terms: int) -> list[tuple[slice, type]]:
    """Chunks of `channels` input channels, each `terms` products per output, whose products
    sum exactly in the chunk's float type: float32 for at most EXACT_F32_TERMS, else float64."""
    step = EXACT_F32_TERMS // terms
    if step == 0:
        return [(slice(None), np.float64)]
    return [(slice(c, c + step), np.float32) for c in range(0, channels, step)]


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


def _check_vectors(values: Sequence[Value], channels: int, names: Sequence[str] = ("bias", "mult")) -> None:
    for v, what in zip(values, names, strict=True):
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


def _check_precise(values: Sequence[Value], attrs: Attrs, channels: int, plain: int) -> None:
    """The precise mode's inputs and parameters (`plain`: the op's input count without it)."""
    split = attr_int(attrs, "split")
    check(split >= 0, f"split {split} must be >= 0 (0: the plain requantization)")
    if split == 0:
        return
    check(len(values) == plain + 2, f"split {split} (precise requantization) needs the inputs clamp_lo and "
          f"clamp_hi after mult, {plain + 2} inputs, not {len(values)}")
    clamps = values[plain:]
    _check_vectors(clamps, channels, ("clamp_lo", "clamp_hi"))
    mult, lo_t, hi_t = (v.data for v in (values[3], *clamps))
    assert mult is not None and lo_t is not None and hi_t is not None
    shift, lo, hi = _epilogue_args(attrs)
    why = precise_checks(mult, lo_t, hi_t, shift, split, (lo, hi))
    check(why is None, f"precise requantization: {why}")


def _dense_requant(acc: np.ndarray, xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """A QGemm's epilogue of `acc` (channels on axis 1) with its inputs `xs`: bias, multiplier,
    and the clamp bounds when precise (`split` > 0); QConv's is `qconv_epilogue`."""
    bias, mult = xs[2], xs[3]
    if attr_int(attrs, "split") > 0:
        return precise_requantize(acc, bias, mult, xs[4], xs[5], *_epilogue_args(attrs))
    return requantize(acc, bias, mult, *_epilogue_args(attrs))


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
    pad_value = attr_int(attrs, "pad_value")
    check(INT8_MIN <= pad_value <= INT8_MAX, f"pad_value {pad_value} is not an int8")
    _check_precise(values, attrs, w.shape[0], 4)
    check(len(values) < 6 or attr_int(attrs, "split") > 0, "QConv takes 6 inputs only with split > 0")
    if len(values) == 5:
        _check_int8(values[4], "residual")
        res = values[4]
        check(res.shape == shape, f"residual {res.name} has shape {res.shape}, the output {shape}")
    return [TensorType(shape, "int8")]


def _qconv(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    fused = fused_qconv(xs, attrs)  # depthwise and pointwise: blocked kernels, the same values
    if fused is not None:
        return [fused]
    return [qconv_epilogue(qconv_acc(xs[0], xs[1], attrs, dtype=np.int32), xs, attrs)]


def qconv_acc(x: np.ndarray, w: np.ndarray, attrs: Attrs, wrap: bool = True,
              dtype: type = np.int64) -> np.ndarray:
    """A QConv's int32 accumulator (before the bias; `conv_acc`'s `wrap` and `dtype`), its
    padding reading `pad_value`."""
    pads, fill = attr_ints(attrs, "pads"), attr_int(attrs, "pad_value")
    if fill and any(pads):  # pad with the value here; the convolution then pads nothing
        top, left, bottom, right = pads
        x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
        pads = (0, 0, 0, 0)
    return conv_acc(x, w, attr_ints(attrs, "strides"), pads, attr_int(attrs, "group"), wrap, dtype)


def qconv_epilogue(acc: np.ndarray, xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """A QConv's output from its int32 accumulator `acc` and its inputs `xs` (bias, multiplier,
    and the residual or the clamp bounds where it has them): `requantize`'s or
    `precise_requantize`'s values, a block of channels at a time (qconv_fused.Epilogue)."""
    return Epilogue.of(xs, attrs).blocked(acc, xs[4] if len(xs) == 5 else None)


register(
    OpDef(
        "QConv",
        (4, 6),
        _qconv_rule,
        _qconv,
        "int8 convolution (any group count) + per-channel int32 bias, multiplier, [+ residual * mult_r], "
        "rounding shift, clip; or precise: bias, clamp, exact multiply, rounding shift, clip",
        {
            "strides": AttrSpec("ints"),
            "pads": AttrSpec("ints"),
            "group": AttrSpec("int", 1),
            "mult_r": AttrSpec("int", 0),
            "split": AttrSpec("int", 0),
            "pad_value": AttrSpec("int", 0),
            **_EPILOGUE,
        },
        foldable=False,
    )
)


# -- QGemm ---------------------------------------------------------------------------------------


def _qgemm_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, w, bias, mult = values[:4]
    _check_int8(x, "input")
    _check_int8(w, "weight")
    check(w.is_const, f"weight {w.name} must be a constant")
    check(x.rank == 2 and w.rank == 2, f"QGemm needs [M,K] data and [N,K] weights, not {x.shape}, {w.shape}")
    check(x.shape[1] == w.shape[1], f"QGemm inner dimensions {x.shape[1]} and {w.shape[1]} differ")
    _check_vectors([bias, mult], w.shape[0])
    _check_epilogue(attrs)
    _check_precise(values, attrs, w.shape[0], 4)
    check(len(values) == 4 or attr_int(attrs, "split") > 0, "QGemm takes 6 inputs only with split > 0")
    return [TensorType((x.shape[0], w.shape[0]), "int8")]


def _qgemm(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    return [_dense_requant(gemm_acc(xs[0], xs[1]), xs, attrs)]


register(
    OpDef(
        "QGemm",
        (4, 6),
        _qgemm_rule,
        _qgemm,
        "int8 x[M,K] @ w[N,K]^T + per-channel int32 bias, multiplier, rounding shift, clip; or precise "
        "(see QConv)",
        {"split": AttrSpec("int", 0), **_EPILOGUE},
        foldable=False,
    )
)


# -- QAdd ----------------------------------------------------------------------------------------


def _qadd_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    a, b = values
    _check_int8(a, "input")
    _check_int8(b, "input")
    check(a.shape == b.shape, f"QAdd of shapes {a.shape} and {b.shape} (no broadcasting)")
    for name in ("mult_a", "mult_b"):
        value = attr_int(attrs, name)
        check(abs(value) <= INT32_MAX, f"{name} {value} does not fit int32")
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
    zero = attr_int(attrs, "zero_point")
    check(INT8_MIN <= zero <= INT8_MAX, f"zero_point {zero} is not an int8")
    return [TensorType(x.shape, "int8")]


def quantize_array(x: np.ndarray, scale: float, zero_point: int = 0) -> np.ndarray:
    """float32 -> int8: x / scale in float32, rounded half to even, plus `zero_point`, saturated
    (the host kernel's rule)."""
    q = np.asarray(x, np.float32) / np.float32(scale)
    np.rint(q, out=q)  # in place: a model's input is large, and fresh temporaries cost page faults
    if zero_point:
        q += np.float32(zero_point)
    return np.clip(q, INT8_MIN, INT8_MAX, out=q).astype(np.int8)


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
        lambda xs, a: [quantize_array(xs[0], attr_float(a, "scale"), attr_int(a, "zero_point"))],
        "float32 -> int8: saturate(round_half_even(x / scale) + zero_point)",
        {"scale": AttrSpec("float"), "zero_point": AttrSpec("int", 0)},
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

__all__ = [
    "conv_acc",
    "dequantize_array",
    "gemm_acc",
    "precise_checks",
    "precise_requantize",
    "precise_steps",
    "quantize_array",
    "requantize",
    "wrap32",
]
