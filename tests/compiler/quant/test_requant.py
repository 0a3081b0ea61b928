"""The multiplier/shift rule, weight and bias quantization, and the accumulator bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.quant import QuantizationError
from compiler.quant.requant import (
    HEADROOM,
    OUT_RANGE,
    accumulator_bounds,
    channel_requant,
    immediate_requant,
    precise_requant,
    quantize_bias,
    quantize_weight,
    saturation_bounds,
)

INT32_MAX = 2**31 - 1

reals = st.floats(1e-7, 0.5, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(reals, st.integers(0, 2**24)), min_size=1, max_size=8))
def test_channel_requant_never_wraps_and_keeps_every_bit_it_can(channels: list[tuple[float, int]]) -> None:
    r = np.array([c[0] for c in channels])
    bound = np.array([c[1] for c in channels], np.float64)
    mult, shift = channel_requant(r, bound, "test")
    assert mult.dtype == np.int32 and 0 <= shift <= 31
    rounding = 2 ** (shift - 1) if shift else 0
    # no value |v| <= bound can wrap in the product or the rounding add
    assert all(int(b) * abs(int(m)) + rounding <= INT32_MAX for b, m in zip(bound, mult, strict=True))
    # mult / 2**shift is round(r * 2**shift) / 2**shift: within half a unit of the last place
    assert np.all(np.abs(mult / 2.0**shift - r) <= 2.0 ** -(shift + 1) * (1 + 1e-12))
    # one more bit of shift would not have fitted (or the shift is already the largest)
    if shift < 31:
        more = np.rint(r * 2.0 ** (shift + 1))
        fits = np.all(more <= INT32_MAX) and np.all(bound * np.abs(more) + 2**shift <= INT32_MAX)
        assert not fits


def test_channel_requant_relative_error_for_a_typical_layer() -> None:
    # ResNet-like: in_scale 0.05, w_scale ~0.003, out_scale 0.05, |acc| up to 2**18
    r = np.array([0.05 * 0.003 / 0.05, 0.05 * 0.0007 / 0.05])
    mult, shift = channel_requant(r, np.array([2**18, 2**18]), "test")
    assert shift == 21  # 2**18 * round(0.003 * 2**21) + 2**20 < 2**31; one more bit would not fit
    np.testing.assert_array_equal(mult, [6291, 1468])
    assert np.all(np.abs(mult / 2.0**shift / r - 1) < 4e-4)


def test_channel_requant_refuses_ratios_no_shift_can_apply() -> None:
    with pytest.raises(
        QuantizationError, match="^conv: scale ratios 3e\\+09 cannot be applied by a multiply and shift$"
    ):
        channel_requant(np.array([3e9]), np.array([1.0]), "conv")


@settings(max_examples=100, deadline=None)
@given(reals, reals)
def test_immediate_requant_fits_16_bits_and_cannot_wrap(ra: float, rb: float) -> None:
    (ma, mb), shift = immediate_requant(np.array([ra, rb]), 128, "add")
    assert abs(ma) <= 32767 and abs(mb) <= 32767
    assert 128 * (abs(ma) + abs(mb)) + (2 ** (shift - 1) if shift else 0) <= INT32_MAX
    for m, r in ((ma, ra), (mb, rb)):
        assert abs(m / 2**shift - r) <= 2.0 ** -(shift + 1) * (1 + 1e-12)
    if shift < 31:  # the larger multiplier would overflow 16 bits at one more bit
        assert max(round(ra * 2 ** (shift + 1)), round(rb * 2 ** (shift + 1))) > 32767


def test_quantize_weight_per_output_channel() -> None:
    w = np.array([[[[1.0, -0.5]]], [[[0.0, 0.0]]], [[[0.03, -0.04]]]], np.float32)  # [3, 1, 1, 2]
    q = quantize_weight(w)
    np.testing.assert_allclose(
        q.scales, [1 / 127, 1 / 127, 0.04 / 127], rtol=1e-7
    )  # zero channel: largest scale
    np.testing.assert_array_equal(q.data.reshape(3, 2), [[127, -64], [0, 0], [95, -127]])
    assert q.data.dtype == np.int8
    t = quantize_weight(np.ascontiguousarray(w.reshape(3, 2).T), axis=1)  # [K, N] with channels on axis 1
    np.testing.assert_array_equal(t.data, q.data.reshape(3, 2).T)


def test_quantize_bias_at_the_accumulator_scale_and_its_overflow() -> None:
    np.testing.assert_array_equal(quantize_bias(np.array([1.0, -2.5]), np.array([0.5, 1.0]), "c"), [2, -2])
    with pytest.raises(
        QuantizationError, match="^conv1: bias does not fit int32 at the accumulator's scale$"
    ):
        quantize_bias(np.array([1.0]), np.array([1e-10]), "conv1")


def test_accumulator_bounds_take_the_smaller_of_the_worst_case_and_the_likely_range() -> None:
    w = np.array([[1, -2, 3], [127, 127, 127]], np.int8)
    bias = np.array([10, -5], np.int32)
    worst = np.array([128 * 6 + 10, 128 * 381 + 5])
    reals = np.array([1e-3, 1e-3])
    np.testing.assert_array_equal(accumulator_bounds(w, bias, reals, np.array([5000.0, 100.0])),
                                  np.minimum(worst, [HEADROOM * 5000, HEADROOM * 100]))
    np.testing.assert_array_equal(
        accumulator_bounds(w, bias, reals, None), np.minimum(worst, OUT_RANGE / 1e-3)
    )


def test_saturation_bounds_by_hand() -> None:
    # m = 100, shift 8: out(t) = (100 t + 128) >> 8; out(-26) = -10 (-2472 >> 8), out(-27) = -11;
    # out(26) = 10 (2728 >> 8), out(27) = 11 (2828 >> 8)
    low, high = saturation_bounds(np.array([100]), 8, (-10, 10))
    assert (int(low[0]), int(high[0])) == (-26, 26)


@settings(max_examples=50, deadline=None)
@given(st.lists(reals, min_size=1, max_size=6), st.sampled_from([(-128, 127), (0, 127), (0, 6)]))
def test_precise_requant_changes_no_output(ratios: list[float], clip: tuple[int, int]) -> None:
    """Clamping at the chosen bounds and the 32-bit two-part multiply give exactly the plain
    clip(round(t * mult / 2**shift)) for every int32 t (checked at the bounds and beyond)."""
    from compiler.graph.opdefs.qops import precise_checks, precise_steps

    p = precise_requant(np.array(ratios), clip, "here")
    m = p.mult.astype(np.int64)
    s = p.shift
    assert precise_checks(m, p.clamp_lo, p.clamp_hi, s, p.split, clip) is None
    assert s == 31 or min(ratios) < 1e-4  # shift 31 fits unless a tiny ratio widens the clamp range
    np.testing.assert_array_equal(np.rint(np.array(ratios) * 2.0**s), m)
    for bound, step in ((p.clamp_lo, -1), (p.clamp_hi, 1)):
        for d in (-3, 0, 5, 1000):
            t = np.clip(bound.astype(np.int64) + step * d, -(2**31), 2**31 - 1)
            plain = np.clip((t * m + 2 ** (s - 1)) >> s, *clip)
            clamped = np.clip(t, p.clamp_lo, p.clamp_hi)
            np.testing.assert_array_equal(plain, precise_steps(clamped, m, s, p.split)[-1])


def test_precise_requant_refuses_ratios_it_cannot_keep_exact() -> None:
    with pytest.raises(QuantizationError, match="here: precise requantization needs positive scale ratios"):
        precise_requant(np.array([0.1, -0.2]), (-128, 127), "here")
    with pytest.raises(QuantizationError, match=r"here: scale ratios 3 have no precise requantization"):
        precise_requant(np.array([3.0]), (-128, 127), "here")
