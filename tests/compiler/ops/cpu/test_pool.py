"""Host pooling against numpy: max pool exactly (it picks an input), averages within RTOL/ATOL."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops.cpu import AvgPool2d, GlobalAvgPool2d, MaxPool2d
from tests.compiler.ops.cpu.util import SIZES, assert_close, assert_exact


@st.composite
def windows(draw):  # type: ignore[no-untyped-def]
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, kh - 2 * ph), 13))
    w = draw(st.integers(max(1, kw - 2 * pw), 13))
    shape = (draw(st.integers(1, 2)), draw(SIZES), h, w)
    return shape, (kh, kw), (sh, sw), (ph, pw)


@settings(max_examples=8, deadline=None)
@given(windows(), st.sampled_from(["float32", "int8", "uint8", "int32"]), st.integers(0, 99))
def test_max_pool_is_exact(window, dtype, seed):
    shape, kernel, stride, pad = window
    assert_exact(MaxPool2d(shape, kernel, stride, pad, dtype), seed)


@settings(max_examples=8, deadline=None)
@given(windows(), st.booleans(), st.integers(0, 99))
def test_avg_pool(window, include_pad, seed):
    shape, kernel, stride, pad = window
    assert_close(AvgPool2d(shape, kernel, stride, pad, include_pad), seed)


def test_resnet18_max_pool_and_padding_never_wins():
    op = MaxPool2d((1, 8, 112, 112), 3, 2, 1)
    assert op.win.out_shape == (1, 8, 56, 56)
    assert_exact(op)
    negative = [-np.abs(x) - 1 for x in op.random_inputs(1)]  # every pad would beat these
    assert_exact(op, inputs=negative)


@pytest.mark.parametrize("pad,stages", [(1, ["data_pad", "vert"]), (0, ["vert"])])
def test_max_pool_takes_the_rows_then_the_columns(pad, stages):
    op = MaxPool2d((1, 4, 16, 16), 3, 2, pad)
    s = op.schedule(op.tensors())
    assert [n for n in s.stages if n != "out"] == stages
    assert s.stage("vert").attach == ("out", "y") and s.stage("vert").loop_kinds == {"x": "vectorize"}
    assert s.stage("vert").leaves[-2:] == ["ry", "x"] and s.stage("out").leaves[-2:] == ["rx", "x"]
    assert_exact(op, seed=4)


def test_avg_pool_counts_only_real_positions_unless_asked():
    ones = [np.ones((1, 1, 3, 3), np.float32)]
    exclude = assert_close(AvgPool2d((1, 1, 3, 3), 3, 1, 1), inputs=ones)
    assert np.all(exclude == 1.0)  # each window averages only the ones it covers
    include = assert_close(AvgPool2d((1, 1, 3, 3), 3, 1, 1, count_include_pad=True), inputs=ones)
    assert include[0, 0, 0, 0] == np.float32(4 / 9) and include[0, 0, 1, 1] == 1.0


@pytest.mark.parametrize("shape", [(1, 512, 7, 7), (2, 3, 1, 1), (1, 5, 13, 3)])
def test_global_avg_pool(shape):
    assert_close(GlobalAvgPool2d(shape))


@pytest.mark.parametrize(
    "cls,params,message",
    [(MaxPool2d, dict(shape=(1, 1, 4, 4), kernel=3, pad=3), r"pad \(3, 3\) must be smaller than the kernel"),
     (MaxPool2d, dict(shape=(1, 1, 2, 2), kernel=5), r"kernel \(5, 5\) is larger than the padded input 2x2"),
     (MaxPool2d, dict(shape=(1, 4, 4), kernel=2), "shape must have 4 dimensions, not 3"),
     (MaxPool2d, dict(shape=(1, 1, 4, 4), kernel=2, dtype="float64"), "data dtype must be one of"),
     (AvgPool2d, dict(shape=(1, 1, 4, 4), kernel=0), "kernel must be an int >= 1 or a pair of them, not 0"),
     (AvgPool2d, dict(shape=(1, 1, 4, 4), kernel=2, stride=(1, 2, 3)), "stride must be an int >= 1 or"),
     (GlobalAvgPool2d, dict(shape=(1, 0, 4, 4)), r"shape must be positive ints, not \(1, 0, 4, 4\)")],
)
def test_bad_parameters(cls, params, message):
    with pytest.raises(ValueError, match=message):
        cls(**params)
