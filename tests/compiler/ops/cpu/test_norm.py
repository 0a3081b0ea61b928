"""Softmax, layer norm and GELU on the host against float64 numpy, within RTOL/ATOL."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops.cpu import Gelu, LayerNorm, Softmax
from tests.compiler.ops.cpu.util import SIZES, assert_close

SHAPES = st.lists(SIZES, min_size=1, max_size=3).map(tuple)


@settings(max_examples=8, deadline=None)
@given(SHAPES, st.integers(0, 99))
def test_softmax(shape, seed):
    got = assert_close(Softmax(shape), seed)
    assert np.allclose(got.sum(axis=-1), 1.0, atol=1e-5)


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 999.0, -1000.0], [-1e4, -1e4, -1e4]], np.float32)
    got = assert_close(Softmax((2, 3)), inputs=[x])
    assert np.all(np.isfinite(got)) and np.allclose(got[1], 1 / 3)


def test_softmax_of_imagenet_logits():
    assert_close(Softmax((1, 1000)), seed=3)


@settings(max_examples=8, deadline=None)
@given(SHAPES, st.booleans(), st.sampled_from([1e-5, 1e-12, 0.5]), st.integers(0, 99))
def test_layer_norm(shape, bias, eps, seed):
    assert_close(LayerNorm(shape, eps, bias), seed, atol=2e-6)


def test_layer_norm_bert_tiny_shape():
    assert_close(LayerNorm((1, 128, 128)), seed=4)


@settings(max_examples=6, deadline=None)
@given(SHAPES, st.integers(0, 99))
def test_gelu(shape, seed):
    assert_close(Gelu(shape), seed)


def test_gelu_tails_and_zero():
    x = np.array([-10.0, -5.0, -3.0, -0.0, 0.0, 1e-8, 3.0, 10.0, 40.0], np.float32)
    got = assert_close(Gelu((9,)), inputs=[x])
    assert got[-1] == 40.0 and got[0] == 0.0 and got[4] == 0.0
    assert abs(got[2] - (-3.0 * 0.5 * math.erfc(3 / math.sqrt(2)))) < 1e-6


@pytest.mark.parametrize(
    "cls,params,message",
    [(Softmax, dict(shape=()), r"shape must have at least 1 dimensions, not \(\)"),
     (LayerNorm, dict(shape=(4,), eps=-1.0), "eps must be a finite float >= 0, not -1.0"),
     (LayerNorm, dict(shape=(4,), eps=float("nan")), "eps must be a finite float >= 0"),
     (Gelu, dict(shape=(2, -1)), r"shape must be positive ints, not \(2, -1\)")],
)
def test_bad_parameters(cls, params, message):
    with pytest.raises(ValueError, match=message):
        cls(**params)
