"""The integer ops of QConv/QGemm are exact: accumulators compared with int64 sums computed tap by
tap, on large inputs whose sums pass float32's exact range (2**24) and on seeded random ones;
the epilogue against Python integers wrapped step by step."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.opdefs.qops import (
    EXACT_F32_TERMS,
    conv_acc,
    gemm_acc,
    requantize,
    round_shift_clip,
    wrap32,
)


def _int64_conv(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, ...], group: int) -> np.ndarray:
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    m, cg, kh, kw = w.shape
    oh, ow = (xp.shape[2] - kh) // stride + 1, (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], m, oh, ow), np.int64)
    mg = m // group
    for g in range(group):
        for dy in range(kh):
            for dx in range(kw):
                rows, cols = slice(dy, dy + oh * stride, stride), slice(dx, dx + ow * stride, stride)
                patch = xp[:, g * cg : (g + 1) * cg, rows, cols]
                taps = w[g * mg : (g + 1) * mg, :, dy, dx].astype(np.int64)
                out[:, g * mg : (g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, taps)
    return out


def _int8(rng: np.random.Generator, shape: tuple[int, ...], extreme: bool) -> np.ndarray:
    if extreme:  # large products with any low bits: sums past 2**24 that float32 would round
        return rng.integers(100, 128, shape, dtype=np.int8)
    return rng.integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.parametrize("extreme", [True, False], ids=["extreme", "random"])
@pytest.mark.parametrize(
    "channels,out,kernel,group,stride,pads",
    [
        (256, 8, 3, 1, 1, (1, 1, 1, 1)),  # 2304 products per output: three float32 chunks
        (2048, 4, 1, 1, 2, (0, 0, 0, 0)),  # 1x1, two chunks
        (1536, 8, 1, 1, 1, (0, 0, 0, 0)),  # 1x1, stride 1: a GEMM per chunk (conv_acc's pointwise path)
        (1300, 4, 1, 1, 1, (1, 0, 0, 1)),  # 1x1 with padding: the general path
        (16, 16, 3, 16, 2, (1, 0, 1, 2)),  # depthwise
        (256, 4, 3, 2, 1, (0, 1, 1, 0)),  # 1152 products per group: float64
    ],
    ids=["dense3x3", "dense1x1", "pointwise", "pointwise-padded", "depthwise", "grouped"],
)
def test_conv_acc_is_the_exact_integer_convolution(
    channels: int, out: int, kernel: int, group: int, stride: int, pads: tuple[int, ...], extreme: bool
) -> None:
    rng = np.random.default_rng(channels + group)
    x = _int8(rng, (2, channels, 6, 5), extreme)
    w = _int8(rng, (out, channels // group, kernel, kernel), extreme)
    want = _int64_conv(x, w, stride, pads, group)
    if extreme and group == 1:
        assert np.abs(want).max() > 2**24  # beyond float32's exact integers in one sum
    got = conv_acc(x, w, (stride, stride), pads, group, wrap=False)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(conv_acc(x, w, (stride, stride), pads, group), wrap32(want))
    narrow = conv_acc(x, w, (stride, stride), pads, group, dtype=np.int32)
    assert narrow.dtype == np.int32
    np.testing.assert_array_equal(narrow, wrap32(want))


@pytest.mark.parametrize("k", [EXACT_F32_TERMS, 3 * EXACT_F32_TERMS + 5])
@pytest.mark.parametrize("extreme", [True, False], ids=["extreme", "random"])
def test_gemm_acc_is_the_exact_integer_product(k: int, extreme: bool) -> None:
    rng = np.random.default_rng(k)
    x, w = _int8(rng, (3, k), extreme), _int8(rng, (5, k), extreme)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    np.testing.assert_array_equal(gemm_acc(x, w, wrap=False), want)
    np.testing.assert_array_equal(gemm_acc(x, w), wrap32(want))


def test_wrap32_wraps_int64_values_in_twos_complement():
    x = np.array([0, 2**31 - 1, 2**31, -(2**31) - 1, 2**32 + 5, -(2**40) - 7], dtype=np.int64)
    got = wrap32(x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [0, 2**31 - 1, -(2**31), 2**31 - 1, 5, -7])


@pytest.mark.parametrize("terms,want", [(2**17 - 1, 2**31 - 2**14), (2**17, -(2**31))])
def test_gemm_acc_wraps_only_sums_that_can_leave_int32(terms: int, want: int) -> None:
    x = np.full((1, terms), -128, dtype=np.int8)  # each product is 2**14: 2**17 of them reach 2**31
    got = gemm_acc(x, x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[want]])


def _wrap(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


@pytest.mark.parametrize("shift", [0, 1, 17, 31])
def test_requantize_wraps_every_step_as_python_integers_do(shift: int) -> None:
    rng = np.random.default_rng(shift)
    lo32, hi32 = -(1 << 31), (1 << 31) - 1
    acc = rng.integers(-(1 << 36), 1 << 36, (2, 3, 4), dtype=np.int64)  # unwrapped accumulators too
    acc[0, 0, :2] = [hi32, lo32]
    bias, mult = (rng.integers(lo32, hi32, 3, dtype=np.int64).astype(np.int32) for _ in range(2))
    residual, mult_r = rng.integers(-128, 128, acc.shape, dtype=np.int8), int(rng.integers(lo32, hi32))
    for res in (None, residual):
        want = np.zeros(acc.shape, np.int8)
        for i in np.ndindex(acc.shape):
            t = _wrap(_wrap(int(acc[i]) + int(bias[i[1]])) * int(mult[i[1]]))
            if res is not None:
                t = _wrap(t + _wrap(int(res[i]) * mult_r))
            if shift:
                t = _wrap(t + (1 << (shift - 1))) >> shift
            want[i] = min(max(t, -100), 90)
        got = requantize(acc, bias, mult, shift, -100, 90, residual=res, mult_r=mult_r)
        np.testing.assert_array_equal(got, want)
    tails = [_wrap(int(v) + (1 << (shift - 1))) >> shift if shift else int(v) for v in acc.ravel()]
    want_tail = np.clip(np.array(tails), -100, 90).reshape(acc.shape)
    np.testing.assert_array_equal(round_shift_clip(acc, shift, -100, 90), want_tail)
