"""The convolution evaluator's bias: added in the GEMM result's own buffer with the bits and the
memory layout that `(y + b).astype(x.dtype)` gives."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.ir import AttrValue
from compiler.graph.opdefs.nn import _biased, _conv, _dense_conv, _windows


def _strides(a: np.ndarray) -> list[int]:
    """Strides of the axes longer than 1 (those of length-1 axes never address memory)."""
    return [s for s, n in zip(a.strides, a.shape, strict=True) if n > 1]


@pytest.mark.parametrize(("cin", "group", "kernel", "dtype"), [
    (16, 1, 1, np.float32),  # the tap-by-tap GEMM, channels-last result
    (24, 1, 3, np.float64),
    (3, 1, 3, np.float32),  # im2col
    (8, 4, 3, np.float32),  # grouped im2col
])
def test_conv_bias_has_the_bits_and_layout_of_y_plus_b(cin: int, group: int, kernel: int,
                                                       dtype: type[np.floating]) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, cin, 7, 5)).astype(dtype)
    w = rng.standard_normal((8, cin // group, kernel, kernel)).astype(dtype)
    b = rng.standard_normal(8).astype(dtype)
    attrs: dict[str, AttrValue] = {"strides": (1, 2), "pads": (1, 0, 1, 1), "dilations": (1, 1),
                                   "group": group}
    unbiased = _conv([x, w], attrs)[0]
    expected = (unbiased + b.reshape(8, 1, 1)).astype(dtype)
    y = _conv([x, w, b], attrs)[0]
    assert y.dtype == dtype and _strides(y) == _strides(expected)
    np.testing.assert_array_equal(np.ascontiguousarray(y).view(np.uint8),
                                  np.ascontiguousarray(expected).view(np.uint8))


def test_a_bias_of_another_type_or_a_view_with_gaps_gets_new_memory() -> None:
    rng = np.random.default_rng(4)
    y = rng.standard_normal((1, 3, 4, 6)).astype(np.float32)
    wide = y[..., :4]  # gaps between rows: adding in place would keep them
    b64 = rng.standard_normal(3)  # float64: the sum is float64, then float32
    for source, bias in ((wide, b64.astype(np.float32)), (y, b64)):
        kept = source.copy()
        out = _biased(source, bias, np.dtype(np.float32))
        expected = (kept + bias.reshape(3, 1, 1)).astype(np.float32)
        np.testing.assert_array_equal(source, kept)
        assert out.flags.c_contiguous
        np.testing.assert_array_equal(out.view(np.int32), expected.view(np.int32))
    assert _biased(y, None, np.dtype(np.float32)) is y


@pytest.mark.parametrize("channels_last", [False, True])
def test_pointwise_conv_is_the_tap_gemm_bit_for_bit(channels_last: bool) -> None:
    """A 1x1 stride-1 unpadded convolution skips the windows (and, channels-last, the copy) and
    gives `_dense_conv`'s bits in its layout."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 5, 7, 20)).astype(np.float32)
    x = np.ascontiguousarray(x).transpose(0, 3, 1, 2) if channels_last else x.transpose(0, 3, 1, 2).copy()
    w = rng.standard_normal((12, 20, 1, 1)).astype(np.float32)
    attrs: dict[str, AttrValue] = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1}
    expected = _dense_conv(_windows(x, attrs, (1, 1), (5, 7), 0.0), w, 35).reshape(2, 12, 5, 7)
    y = _conv([x, w], attrs)[0]
    assert _strides(y) == _strides(expected)
    np.testing.assert_array_equal(np.ascontiguousarray(y).view(np.int32),
                                  np.ascontiguousarray(expected).view(np.int32))
