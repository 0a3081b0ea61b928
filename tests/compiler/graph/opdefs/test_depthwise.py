"""The depthwise convolution's phase form against a loop over outputs and taps, and against the
interpreter's window form, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.ir import AttrValue, Value
from compiler.graph.opdefs.depthwise import depthwise_conv2d
from compiler.graph.opdefs.nn import _conv, _depthwise_conv, _spatial, _windows


def _by_loops(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], pads: tuple[int, ...]) -> np.ndarray:
    """Each output as the first tap's product plus each later tap's, in kernel order."""
    (kh, kw), (sh, sw) = w.shape[2:], strides
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    y = np.zeros((*x.shape[:2], oh, ow), x.dtype)
    for n, c, i, j in np.ndindex(y.shape):
        acc = None
        for ky, kx in np.ndindex(kh, kw):
            p = x.dtype.type(xp[n, c, i * sh + ky, j * sw + kx] * x.dtype.type(w[c, 0, ky, kx]))
            acc = p if acc is None else x.dtype.type(acc + p)
        y[n, c, i, j] = acc
    return y


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads"), [
    ((1, 3, 7, 9), (3, 3), (1, 1), (1, 1, 1, 1)),
    ((2, 2, 8, 8), (5, 5), (2, 2), (1, 2, 2, 1)),  # asymmetric, as TF's "same" pads fold
    ((1, 4, 9, 6), (3, 2), (3, 2), (0, 0, 0, 0)),  # trailing rows no window reads
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 2, 2, 3), (4, 4), (1, 3), (2, 1, 3, 2)),  # kernel larger than the input
])
def test_phase_form_is_the_tap_sum_bit_for_bit(shape: tuple[int, ...], kernel: tuple[int, int],
                                                strides: tuple[int, int], pads: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], 1, *kernel)).astype(np.float32)
    expected = _by_loops(x, w, strides, pads)
    y = depthwise_conv2d(x, w, strides, pads, expected.shape[2:])
    np.testing.assert_array_equal(y.view(np.int32), expected.view(np.int32))


@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (2, 1)])
def test_channels_last_input_and_bias_give_the_biased_tap_sum_c_contiguous(strides: tuple[int, int]) -> None:
    """An input channels-last in memory (as the GEMM convolutions leave it) is read row by row;
    the bias is added after the tap sum; the result is a new C-contiguous array."""
    rng = np.random.default_rng(11)
    x = np.ascontiguousarray(rng.standard_normal((2, 7, 9, 6)).astype(np.float32)).transpose(0, 3, 1, 2)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    pads = (1, 0, 2, 1)
    expected = _by_loops(x, w, strides, pads) + b.reshape(6, 1, 1)
    y = depthwise_conv2d(x, w, strides, pads, expected.shape[2:], b)
    assert y.flags.c_contiguous and y.dtype == np.float32
    np.testing.assert_array_equal(y.view(np.int32), expected.view(np.int32))


def test_conv_takes_the_phase_form_with_the_window_forms_bits() -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        c, h, wd, kh, kw, sh, sw = (int(v) for v in rng.integers(1, 6, 7))
        pads = tuple(int(v) for v in rng.integers(0, 3, 4))
        if h + pads[0] + pads[2] < kh or wd + pads[1] + pads[3] < kw:
            continue
        dtype = np.float64 if rng.random() < 0.3 else np.float32
        x = rng.standard_normal((2, c, h, wd)).astype(dtype)
        w = rng.standard_normal((c, 1, kh, kw)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        attrs: dict[str, AttrValue] = {"strides": (sh, sw), "pads": pads, "dilations": (1, 1), "group": c}
        out = _spatial(Value("x", x.shape, x.dtype.name), attrs, (kh, kw))
        windows = _depthwise_conv(_windows(x, attrs, (kh, kw), out, 0.0), w)
        expected = (windows + b.reshape(c, 1, 1)).astype(dtype)
        y = _conv([x, w, b], attrs)[0]
        assert y.dtype == dtype and y.shape == expected.shape
        np.testing.assert_array_equal(np.ascontiguousarray(y).view(np.uint8), expected.view(np.uint8))
