"""Integer parameters of the quantized ops: int8 weights, int32 biases, and the multiplier and
shift that requantize an int32 accumulator to the output's scale.

**The multiplier/shift rule.** A requantization multiplies a value v (|v| <= `bound`) by an
integer `mult` and shifts right by `shift` with rounding, so mult / 2**shift stands for a real
ratio r (in_scale * w_scale[k] / out_scale for a convolution). The relative error of
mult = round(r * 2**shift) is at most 2**-(shift + 1) / r, so the shift is the largest in
[0, 31] for which every channel still fits: |mult| within its register (int32 for the
per-channel vectors, a signed 16-bit immediate for QAdd and QGlobalAvgPool) and
bound * |mult| + 2**(shift - 1) <= 2**31 - 1, so neither the product nor the rounding add can
wrap. One shift serves all channels (the ALU shifts a whole tile by one immediate); each
channel's multiplier then has as many bits as that shift gives it.

**The bound.** For QAdd and QGlobalAvgPool the worst case is small (|a|, |b| <= 128; a sum of
H*W int8 values) and is used as it is. For QConv/QGemm the worst case (128 * sum|w[k]| +
|bias[k]|) would waste 4-6 bits, so the bound is `HEADROOM` times the largest |acc + bias| seen
on the calibration data (estimated from the float run as max|y[k]| / (in_scale * w_scale[k])),
never more than the worst case: inputs may exceed anything calibration saw by a factor
HEADROOM before a value can wrap. Without calibration data (a QDQ file imported as it is) the
bound is the accumulator that makes a pre-clip output of `OUT_RANGE` steps, i.e. outputs up to
OUT_RANGE / 128 times past saturation never wrap.

**The precise rule** (`precise_requant`, for QDQ imports: the contract's precise mode). The
bound above costs the multiplier 6-10 bits when no calibration data is given. Instead,
t = acc + bias is clamped per channel to [clamp_lo, clamp_hi], the first and last t whose
output is not yet saturated (beyond them the output is clip_lo or clip_hi anyway), so |t| is at
most about 128 / ratio and the multiply can take shift 31; it runs as a two-part multiply in
32-bit steps (split k), exact for every t. Multipliers keep 30-31 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.graph.opdefs.qops import IMM_MAX, INT8_MAX, INT32_MAX, INT32_MIN, SHIFT_MAX, precise_checks
from compiler.quant.errors import QuantizationError
from compiler.quant.rounding import gptq_levels

HEADROOM = 4.0
OUT_RANGE = float(1 << 11)
ACT_MAX = 128  # the largest |int8| value
# The most accumulator steps a bias may take: a channel whose weights are almost zero (a batch
# norm folded with a tiny gamma) but whose bias is real gets a weight scale at least
# |bias| / (in_scale * BIAS_STEPS), so its bias fits int32 with room for the accumulator and
# the offsets added to it; its weights then round to (near) zero, which they nearly are.
BIAS_STEPS = float(1 << 22)


@dataclass(frozen=True)
class QWeight:
    """Symmetric int8 weights with one scale per output channel (`axis`), or one for the tensor
    (`scales` of size 1)."""

    data: np.ndarray  # int8, the float weight's layout
    scales: np.ndarray  # float64 [channels] or [1]
    axis: int = 0

    def channel_scales(self, channels: int) -> np.ndarray:
        """The scale of each of `channels` output channels."""
        if self.scales.size == 1:
            return np.full(channels, float(self.scales.reshape(-1)[0]))
        if self.scales.size != channels:
            raise QuantizationError(f"weight has {self.scales.size} channel scales for {channels} channels")
        return self.scales.astype(np.float64)


def quantize_weight(w: np.ndarray, axis: int = 0, moment: np.ndarray | None = None,
                    min_scales: np.ndarray | None = None) -> QWeight:
    """Per-output-channel symmetric int8: scale = max|w[k]| / 127, w_q = round(w / scale).

    A channel of zeros takes the largest channel scale (any positive scale represents it; a tiny
    one would make its bias overflow int32). No channel's scale is below `min_scales[k]` (see
    `bias_scale_floor`). With `moment`, the second moment [groups, n, n] of the inputs that each
    group of output channels multiplies (n = the other axes' size), the levels are GPTQ's
    (compiler.quant.rounding) instead of the nearest ones."""
    moved = np.moveaxis(np.asarray(w, np.float64), axis, 0)
    rows = moved.reshape(moved.shape[0], -1)
    amax = np.abs(rows).max(axis=1, initial=0.0)
    fallback = amax.max() if amax.max() > 0 else 1.0
    scales = np.where(amax > 0, amax, fallback) / INT8_MAX
    if min_scales is not None:
        scales = np.maximum(scales, np.asarray(min_scales, np.float64))
    scales = scales.astype(np.float32).astype(np.float64)  # as a file would store them
    if moment is None:
        q = np.clip(np.rint(rows / scales[:, None]), -INT8_MAX, INT8_MAX)
    else:
        q = _gptq_rows(rows, scales, moment)
    return QWeight(np.moveaxis(q.astype(np.int8).reshape(moved.shape), 0, axis), scales, axis)


def _gptq_rows(rows: np.ndarray, scales: np.ndarray, moment: np.ndarray) -> np.ndarray:
    """GPTQ levels of `rows` [k, n], output channels split evenly over the moment's groups."""
    groups, n = moment.shape[0], rows.shape[1]
    if moment.shape != (groups, n, n) or rows.shape[0] % groups:
        raise QuantizationError(f"input moment {moment.shape} does not fit a weight of {rows.shape[0]} x {n}")
    shape = (groups, rows.shape[0] // groups)
    return gptq_levels(rows.reshape(*shape, n), moment, scales.reshape(shape)).reshape(rows.shape)


def bias_scale_floor(bias: np.ndarray, in_scale: float) -> np.ndarray:
    """The smallest weight scale per channel at which `bias` (float) takes at most BIAS_STEPS
    accumulator steps of in_scale * w_scale[k]."""
    return np.abs(np.asarray(bias, np.float64)) / (in_scale * BIAS_STEPS)


def quantize_bias(bias: np.ndarray, acc_scales: np.ndarray, where: str) -> np.ndarray:
    """int32 bias at the accumulator's per-channel scale (in_scale * w_scale[k])."""
    return int32_bias(np.rint(np.asarray(bias, np.float64) / acc_scales), where)


def int32_bias(bias: np.ndarray, where: str) -> np.ndarray:
    """Integer-valued `bias` (accumulator steps) as int32, or an error naming `where`."""
    if np.abs(bias).max(initial=0) > INT32_MAX:
        raise QuantizationError(f"{where}: bias does not fit int32 at the accumulator's scale")
    return bias.astype(np.int32)


def choose_shift(
    reals: np.ndarray, fits: Callable[[np.ndarray, int], bool], where: str
) -> tuple[np.ndarray, int]:
    """(mult, shift): mult = round(reals * 2**shift) for the largest shift in [0, 31] that `fits`."""
    reals = np.asarray(reals, np.float64)
    for shift in range(SHIFT_MAX, -1, -1):
        mult = np.rint(reals * float(1 << shift))
        if fits(mult, shift):
            return mult.astype(np.int64), shift
    raise QuantizationError(
        f"{where}: scale ratios {reals.max():.3g} cannot be applied by a multiply and shift"
    )


def _rounding(shift: int) -> int:
    return (1 << (shift - 1)) if shift > 0 else 0


def channel_requant(reals: np.ndarray, bounds: np.ndarray, where: str) -> tuple[np.ndarray, int]:
    """Per-channel int32 multipliers and one shift for values |v[k]| <= bounds[k] (see the module doc)."""
    bounds = np.asarray(bounds, np.float64)

    def fits(mult: np.ndarray, shift: int) -> bool:
        if np.abs(mult).max(initial=0) > INT32_MAX:
            return False
        return bool((bounds * np.abs(mult) + _rounding(shift) <= INT32_MAX).all())

    mult, shift = choose_shift(reals, fits, where)
    return mult.astype(np.int32), shift


def immediate_requant(
    reals: np.ndarray, bound: float, where: str, limit: int = IMM_MAX
) -> tuple[list[int], int]:
    """Multipliers within `limit` (a 16-bit immediate by default) and one shift for
    sum_i v_i * mult_i with |v_i| <= bound."""

    def fits(mult: np.ndarray, shift: int) -> bool:
        if np.abs(mult).max(initial=0) > limit:
            return False
        return bool(bound * np.abs(mult).sum() + _rounding(shift) <= INT32_MAX)

    mult, shift = choose_shift(reals, fits, where)
    return [int(m) for m in mult], shift


def accumulator_bounds(
    weight: np.ndarray, bias: np.ndarray, reals: np.ndarray, observed: np.ndarray | None
) -> np.ndarray:
    """Per-channel bound on |acc + bias| (see the module doc).

    `weight` int8 with output channels first, `bias` int32; `observed` the largest |acc + bias|
    per channel on the calibration data (accumulator units), None without calibration data.
    """
    w = np.abs(weight.astype(np.int64)).reshape(weight.shape[0], -1).sum(axis=1)
    worst = ACT_MAX * w + np.abs(bias.astype(np.int64))
    if observed is None:
        likely = OUT_RANGE / np.maximum(reals, 1e-300)
    else:
        likely = HEADROOM * np.asarray(observed, np.float64)
    return np.minimum(worst.astype(np.float64), np.ceil(likely))


@dataclass(frozen=True)
class PreciseRequant:
    """A precise requantization (the contract's `split` mode): int32 multipliers, one shift and
    split, and the int32 clamp bounds of acc + bias per channel."""

    mult: np.ndarray
    shift: int
    split: int
    clamp_lo: np.ndarray
    clamp_hi: np.ndarray


def saturation_bounds(mult: np.ndarray, shift: int, clip: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per channel the first t whose output (t * mult + 2**(shift - 1)) >> shift reaches clip[0]
    and the last that stays within clip[1] (mult > 0), within int32."""
    m = np.asarray(mult, np.int64)
    half = 1 << (shift - 1)
    low = -((half - (clip[0] << shift)) // m)  # ceil((lo * 2**s - half) / m)
    high = (((clip[1] + 1) << shift) - half - 1) // m
    return np.clip(low, INT32_MIN, INT32_MAX), np.clip(high, INT32_MIN, INT32_MAX)


def precise_requant(reals: np.ndarray, clip: tuple[int, int], where: str) -> PreciseRequant:
    """The precise requantization of per-channel ratios `reals` (> 0) with output clip `clip`:
    the largest shift whose multipliers fit int32, clamped at the saturation points so that
    clamping changes no output, with the largest split that keeps every 32-bit step exact."""
    reals = np.asarray(reals, np.float64)
    if not (reals > 0).all():
        raise QuantizationError(f"{where}: precise requantization needs positive scale ratios")
    for shift in range(SHIFT_MAX, 1, -1):
        mult = np.rint(reals * float(1 << shift)).astype(np.int64)
        if mult.max() > INT32_MAX or mult.min() <= 0:
            continue
        low, high = saturation_bounds(mult, shift, clip)
        out = [(t * mult + (1 << (shift - 1))) >> shift for t in (low, high)]
        # where the ratio exceeds 1 an output can step over clip[0] or clip[1]: clamping would change it
        exact = ((out[0] == clip[0]) | (low == INT32_MIN)) & ((out[1] == clip[1]) | (high == INT32_MAX))
        if not exact.all():
            continue
        for split in range(shift - 1, 0, -1):
            if precise_checks(mult, low, high, shift, split, clip) is None:
                return PreciseRequant(mult.astype(np.int32), shift, split, low.astype(np.int32),
                                      high.astype(np.int32))
    raise QuantizationError(f"{where}: scale ratios {reals.max():.3g} have no precise requantization")
