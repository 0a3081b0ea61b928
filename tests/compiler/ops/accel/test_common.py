"""The shared epilogue: its checks, and its numpy form against a hand-worked example."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ops.accel import Epilogue


@pytest.mark.parametrize("kwargs, match", [
    ({"shift": 32}, r"epilogue shift must be in \[0, 31\], not 32"),
    ({"shift": -1}, r"epilogue shift must be in \[0, 31\], not -1"),
    ({"clip": (5, 4)}, r"epilogue clip \(5, 4\): low is above high"),
    ({"multiplier": 3, "channel_multiplier": True},
     "epilogue takes one multiplier: an immediate or a per-channel vector, not both"),
    ({"scaled_bias": True}, "epilogue scaled_bias needs a bias and a multiplier"),
    ({"scaled_bias": True, "bias": False, "multiplier": 3},
     "epilogue scaled_bias needs a bias and a multiplier"),
    ({"scaled_bias": True, "multiplier": 3, "round": True},
     "epilogue scaled_bias carries the rounding in the bias: round must be off"),
])
def test_bad_epilogues(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Epilogue(**kwargs)


def test_per_channel_requantization_by_hand():
    ep = Epilogue(bias=True, channel_multiplier=True, round=True, shift=4, clip=(-128, 127))
    assert ep.vectors == ("bias", "mult") and ep.alu_ops == 1 + 1 + 1 + 1 + 2
    acc = np.array([[100, -100], [2**30, 7]])
    bias = np.array([[4, -4]])
    mult = np.array([[3, 5]])
    # (100+4)*3=312, +8 -> 320 >> 4 = 20;  (-100-4)*5=-520, +8 -> -512 >> 4 = -32
    # (2**30+4)*3 wraps to -1073741812 (= 3*2**30 + 12 - 2**32), +8 >> 4 = -67108863 -> clip -128
    # (7-4)*5=15, +8 -> 23 >> 4 = 1
    got = ep.apply(acc, {"bias": bias, "mult": mult})
    np.testing.assert_array_equal(got, np.array([[20, -32], [-128, 1]], dtype=np.int8))


def test_a_rounding_constant_beyond_the_immediate_is_a_vector():
    assert Epilogue(round=True, shift=16).vectors == ("bias", "round")  # 2**15 > 32767
    assert Epilogue(round=True, shift=16).round_vector is True
    assert Epilogue(round=True, shift=15).round_vector is False  # 2**14 is an immediate
    ep = Epilogue(bias=False, channel_multiplier=True, round=True, shift=23)
    assert ep.vectors == ("mult", "round") and ep.alu_ops == 1 + 1 + 1 + 2
    assert (ep.vector_values("round", 3) == 1 << 22).all()


def test_scaled_bias_saves_the_rounding_step_and_gives_the_same_int8():
    """acc * m + (b * m + r) is (acc + b) * m + r modulo 2**32, wraps included."""
    plain = Epilogue(bias=True, channel_multiplier=True, round=True, shift=18, clip=(-128, 127))
    scaled = Epilogue(bias=True, channel_multiplier=True, shift=18, clip=(-128, 127), scaled_bias=True)
    assert scaled.alu_ops == plain.alu_ops - 1 and scaled.vectors == ("bias", "mult")
    rng = np.random.default_rng(7)
    acc = rng.integers(-(2**31), 2**31, (64, 32))
    acc[:32] //= 1 << 22  # half of them small enough not to wrap or saturate
    bias = rng.integers(-(2**10), 2**10, (1, 32))
    mult = rng.integers(-(2**14), 2**14, (1, 32))
    expect = plain.apply(acc, {"bias": bias, "mult": mult})
    got = scaled.apply(acc, {"bias": scaled.scale_bias(bias, mult), "mult": mult})
    np.testing.assert_array_equal(got, expect)
    assert len(np.unique(expect)) > 40  # not all saturated


def test_scale_bias_by_hand():
    ep = Epilogue(bias=True, multiplier=3, shift=4, scaled_bias=True)
    # 5 * 3 + 8 = 23; (2**30) * 3 + 8 wraps to 2**30 - 2**31 ... = -1073741816
    np.testing.assert_array_equal(ep.scale_bias(np.array([5, 2**30]), 3), [23, 3 * 2**30 + 8 - 2**32])
    assert Epilogue(bias=True, multiplier=3, shift=0, scaled_bias=True).scale_bias(np.array([5]), 3)[0] == 15


def test_residual_by_hand():
    ep = Epilogue(bias=True, multiplier=2, shift=2, round=True, clip=(-128, 127), residual=3)
    assert ep.alu_ops == 1 + 1 + 1 + 1 + 2 + 2 and ep.vectors == ("bias",)
    # ((10 + 1) * 2 + 4 * 3 + 2) >> 2 = 36 >> 2 = 9;  ((-10 + 1) * 2 + (-4) * 3 + 2) >> 2 = -28 >> 2 = -7
    got = ep.apply(np.array([10, -10]), {"bias": np.array([1, 1])}, np.array([4, -4], np.int8))
    np.testing.assert_array_equal(got, [9, -7])


def test_a_residual_multiplier_beyond_the_immediate_is_a_vector():
    assert Epilogue(residual=1).residual_ops == 1  # added, not multiplied
    assert Epilogue(residual=32767).vectors == ("bias",)
    ep = Epilogue(residual=-32768)
    assert ep.residual_vector and ep.vectors == ("bias", "rmult") and ep.residual_ops == 2
    assert (ep.vector_values("rmult", 2) == -32768).all()


@pytest.mark.parametrize("kwargs, match", [
    ({"split": -1}, r"epilogue split must be >= 0, not -1"),
    ({"split": 3, "shift": 8},
     r"epilogue split \(precise requantization\) needs bias, channel_multiplier and round"),
    ({"split": 3, "shift": 8, "channel_multiplier": True, "round": True, "bias": False},
     r"needs bias, channel_multiplier and round"),
    ({"split": 3, "shift": 8, "channel_multiplier": True, "round": True, "residual": 2},
     r"takes no scaled_bias, residual or immediate multiplier"),
    ({"split": 8, "shift": 8, "channel_multiplier": True, "round": True},
     r"epilogue split 8 must be below the shift 8"),
])
def test_bad_precise_epilogues(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Epilogue(**kwargs)


def test_precise_requantization_by_hand():
    ep = Epilogue(channel_multiplier=True, round=True, shift=8, split=3, clip=None)
    # the rounding 2**4 is an immediate
    assert ep.vectors == ("bias", "clamp_lo", "clamp_hi", "mult_lo", "mult_hi")
    assert ep.alu_ops == 13 and ep.acc_tiles == 3 and ep.rounding == 16
    mult = np.array([[100, 77]])  # 100 = 12 * 8 + 4; 77 = 9 * 8 + 5
    parts = ep.split_mult(mult)
    np.testing.assert_array_equal(parts["mult_hi"], [[12, 9]])
    np.testing.assert_array_equal(parts["mult_lo"], [[4, 5]])
    vectors = {"bias": np.array([[3, -3]]), "clamp_lo": np.array([[-300, -10]]),
               "clamp_hi": np.array([[300, 10]]), **parts}
    acc = np.array([[10, 10], [-1000, 1000], [2, -8]])
    # t = 13: 13*12 = 156, (13*4) >> 3 = 6, 156 + 6 + 16 = 178 >> 5 = 5 (= (1300 + 128) >> 8)
    # t = 7: 63 + ((35) >> 3 = 4) + 16 = 83 >> 5 = 2 (= (539 + 128) >> 8)
    # t = -997 -> -300: -3600 + (-1200 >> 3 = -150) + 16 = -3734 >> 5 = -117 (= (-30000 + 128) >> 8)
    # t = 997 -> 10: 90 + (50 >> 3 = 6) + 16 = 112 >> 5 = 3 (= (770 + 128) >> 8)
    # t = 5: 60 + 2 + 16 = 78 >> 5 = 2;  t = -11 -> -10: -90 + (-50 >> 3 = -7) + 16 = -81 >> 5 = -3
    got = ep.apply(acc, vectors)
    np.testing.assert_array_equal(got, np.array([[5, 2], [-117, 3], [2, -3]], dtype=np.int8))
    m = mult.astype(np.int64)
    t = np.clip(acc + vectors["bias"], vectors["clamp_lo"], vectors["clamp_hi"])
    np.testing.assert_array_equal(got, (t * m + 128) >> 8)


def test_a_precise_rounding_beyond_the_immediate_is_a_vector():
    ep = Epilogue(channel_multiplier=True, round=True, shift=31, split=13, clip=(0, 127))
    assert ep.round_vector and ep.vectors[-1] == "round" and ep.alu_ops == 15
    assert (ep.vector_values("round", 2) == 1 << 17).all()
