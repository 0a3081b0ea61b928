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
