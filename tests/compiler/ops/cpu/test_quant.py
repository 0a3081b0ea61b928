"""Quantize, dequantize and requantize on the host: exactly numpy's results, ties and saturation
included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops.cpu import Dequantize, Quantize, Requantize
from tests.compiler.ops.cpu.util import SIZES, assert_exact, run

SHAPES = st.lists(SIZES, min_size=1, max_size=3).map(tuple)
SCALES = st.sampled_from([0.1, 0.02, 1.0, 3.7, 1 / 255])


@settings(max_examples=8, deadline=None)
@given(SHAPES, SCALES, st.sampled_from([("int8", -5), ("int8", 0), ("uint8", 128), ("uint8", 0)]),
       st.integers(0, 99))
def test_quantize(shape, scale, target, seed):
    dtype, zero_point = target
    op = Quantize(shape, scale, zero_point, dtype)
    x = (np.random.default_rng(seed).standard_normal(shape) * 200 * scale).astype(np.float32)
    assert_exact(op, inputs=[x])


def test_quantize_rounds_half_to_even_and_saturates():
    scale = 0.5  # x / 0.5 is exact, so these are true ties
    x = np.array([0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 1e9, -1e9, 63.75, -64.25], np.float32)
    got, ref = run(Quantize((10,), scale, 1), inputs=[x])
    # x / scale: 0.5 1.5 2.5 -0.5 -1.5 -2.5 2e9 -2e9 127.5 -128.5, rounded half to even, plus 1
    assert got.tolist() == [1, 3, 3, 1, -1, -1, 127, -128, 127, -127]
    assert np.array_equal(got, ref)


@settings(max_examples=6, deadline=None)
@given(SHAPES, SCALES, st.sampled_from([("int8", 3), ("uint8", 128), ("int32", -7)]), st.integers(0, 99))
def test_dequantize(shape, scale, source, seed):
    assert_exact(Dequantize(shape, scale, source[1], source[0]), seed)


@settings(max_examples=6, deadline=None)
@given(SHAPES, st.sampled_from([1 / 300, 0.01, 0.5]), st.sampled_from([0, -3, 10]), st.integers(0, 99))
def test_requantize_with_a_float_scale(shape, scale, zero_point, seed):
    x = np.random.default_rng(seed).integers(-40000, 40000, shape).astype(np.int32)
    assert_exact(Requantize(shape, scale=scale, zero_point=zero_point), inputs=[x])


@pytest.mark.parametrize("multiplier,shift,zero_point,dtype", [
    (12345, 24, 5, "int8"), (2**31 - 1, 40, 0, "int8"), (1, 0, 0, "int8"),
    (77, 8, 128, "uint8")])
def test_requantize_in_integers_rounds_half_up_without_overflow(multiplier, shift, zero_point, dtype):
    x = np.random.default_rng(0).integers(-(2**31), 2**31, 999, dtype=np.int64).astype(np.int32)
    x[:4] = [-(2**31), 2**31 - 1, 0, -1]
    op = Requantize((999,), multiplier=multiplier, shift=shift, zero_point=zero_point, dtype=dtype)
    assert_exact(op, inputs=[x])
    half = np.array([128, 384, -128, -384], np.int32)  # exactly .5 after >> 8 with multiplier 1
    got, _ = run(Requantize((4,), multiplier=1, shift=8), inputs=[half])
    assert got.tolist() == [1, 2, 0, -1]


@pytest.mark.parametrize(
    "cls,params,message",
    [(Quantize, dict(shape=(2,), scale=0.0), "scale must be a finite float > 0, not 0.0"),
     (Quantize, dict(shape=(2,), scale=float("inf")), "scale must be a finite float > 0"),
     (Quantize, dict(shape=(2,), scale=1.0, zero_point=200), r"zero_point of int8 must be an int in \[-128"),
     (Quantize, dict(shape=(2,), scale=1.0, dtype="int16"), "output dtype must be one of int8, uint8"),
     (Dequantize, dict(shape=(2,), scale=1.0, dtype="float32"), "input dtype must be one of"),
     (Requantize, dict(shape=(2,)), "give either scale or multiplier"),
     (Requantize, dict(shape=(2,), scale=0.5, multiplier=3), "give either scale or multiplier .* not both"),
     (Requantize, dict(shape=(2,), multiplier=0), r"multiplier must be an int in \[1, 2147483647\], not 0"),
     (Requantize, dict(shape=(2,), multiplier=3, shift=63), r"shift must be an int in \[0, 62\], not 63")],
)
def test_bad_parameters(cls, params, message):
    with pytest.raises(ValueError, match=message):
        cls(**params)
