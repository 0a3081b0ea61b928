"""The shared epilogue: its checks, and its numpy form against a hand-worked example."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ops import Epilogue


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
])  # fmt: skip
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
