"""Float32 clip and relu bit for bit as the graph interpreter's Clip and Relu (numpy's
minimum(maximum(x, min), max)), NaN, signed zeros, infinities and min above max included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.opdefs import OPS, make_attrs
from compiler.ops.cpu import Clip, Relu
from tests.compiler.ops.cpu.util import SIZES, assert_exact, run

INF = math.inf
# Over [-8, 8], both bounds of the cases below, and the edges.
EDGES = [0.0, -0.0, INF, -INF, math.nan, 1e-40, -1e-40, 6.0, -1.5, 2.25, 0.1, 2.0, 3.0, 1.0, 3e38]
X = np.concatenate([np.linspace(-8, 8, 4001), EDGES, np.negative(EDGES)]).astype(np.float32)


def identical(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal values, NaN where NaN, and the same sign on every zero."""
    return np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("low,high", [
    (0.0, 6.0),  # ReLU6
    (-INF, 0.0), (0.0, INF), (-INF, INF), (-1.5, 2.25), (2.0, 2.0),
    (-0.0, 0.0), (0.0, -0.0),  # a tie gives the bound, its zero sign too
    (3.0, 1.0),  # min above max: max everywhere (but NaN)
    (0.1, 3e38),  # rounded to float32 first
])
def test_clip_equals_the_interpreter(low, high):
    op = Clip(X.shape, low, high)
    got, ref = run(op, inputs=[X])
    (want,) = OPS["Clip"].evaluate([X], make_attrs("Clip", {"min": low, "max": high}))
    assert identical(got, ref) and identical(got, want)
    assert np.isnan(got[np.isnan(X)]).all()
    if low != -INF or high != INF:
        assert "x float>" in op.build().optimized_ir  # vectorised


def test_relu_equals_the_interpreter():
    op = Relu(X.shape)
    got, ref = run(op, inputs=[X])
    (want,) = OPS["Relu"].evaluate([X], make_attrs("Relu", {}))
    assert identical(got, ref) and identical(got, want)
    zeros = got[X == 0]
    assert zeros.size and not np.signbit(zeros).any()  # Relu(-0) = +0, as numpy's maximum(-0, 0)
    assert "x float>" in op.build().optimized_ir


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.lists(SIZES, min_size=1, max_size=4), st.integers(0, 99))
def test_any_shape(shape, seed):
    assert_exact(Relu(tuple(shape)), seed)
    assert_exact(Clip(tuple(shape), -0.5, 0.5), seed)


def test_bounds_are_float32_values():
    op = Clip((4,), 0.1, 1e40)
    assert op.min == float(np.float32(0.1)) and op.max == INF
    assert Clip((4,), np.int64(0), np.float32(6)) == Clip((4,), 0.0, 6.0)


@pytest.mark.parametrize("params,message", [
    (dict(min=math.nan), "clip: min must be a number, not nan"),
    (dict(max=np.float32("nan")), "clip: max must be a number, not nan"),
    (dict(max="6"), "clip: max must be a float, not '6'"),
    (dict(min=True), "clip: min must be a float, not True"),
])
def test_bad_bounds(params, message):
    with pytest.raises(ValueError, match=message):
        Clip((4,), **params)


def test_bad_shapes():
    with pytest.raises(ValueError, match="relu: shape must be positive ints"):
        Relu((2, 0))
    with pytest.raises(ValueError, match="clip: shape must have at least 1 dimensions"):
        Clip(())
