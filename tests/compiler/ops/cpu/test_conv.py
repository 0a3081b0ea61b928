"""The host's direct int8 convolution against an exact numpy reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops.cpu import Conv2dInt8
from tests.compiler.ops.cpu.util import SIZES, assert_exact


@st.composite
def convs(draw):  # type: ignore[no-untyped-def]
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ph, pw = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, kh - 2 * ph), 11))
    w = draw(st.integers(max(1, kw - 2 * pw), 11))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 4)), h, w)
    return Conv2dInt8(shape, draw(SIZES), (kh, kw), stride, (ph, pw), draw(st.booleans()))


@settings(max_examples=8, deadline=None)
@given(convs(), st.integers(0, 99))
def test_generated_convolutions_are_exact(op, seed):
    assert_exact(op, seed)


@pytest.mark.parametrize("op", [
    Conv2dInt8((1, 3, 32, 32), 64, 7, 2, 3),  # ResNet-18's first convolution, smaller image
    Conv2dInt8((1, 3, 30, 30), 32, 3, 2, 1, bias=True),  # MobileNetV2's, smaller image
    Conv2dInt8((1, 1, 8, 8), 16, 5, 1, 2, bias=True),  # a digits-sized one
])
def test_first_convolutions_of_the_zoo_models(op):
    assert_exact(op, seed=1)


def test_extreme_values_accumulate_without_overflow():
    op = Conv2dInt8((1, 4, 7, 7), 3, 7, 1, 0)
    data, weight = op.random_inputs(0)
    data[:] = -128
    weight[:] = -128  # 196 products of 2**14: 3.2M, far inside int32
    assert_exact(op, inputs=[data, weight])


@pytest.mark.parametrize(
    "params,message",
    [(dict(shape=(1, 3, 4, 4), out_channels=0, kernel=3), "out_channels must be an int >= 1, not 0"),
     (dict(shape=(1, 3, 2, 2), out_channels=4, kernel=5), "kernel .* is larger than the padded input"),
     (dict(shape=(1, 3, 4, 4), out_channels=4, kernel=3, pad=-1), "pad must be an int >= 0 or a pair")],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        Conv2dInt8(**params)
