"""QConv's fused depthwise and pointwise kernels against an int64 convolution and an epilogue in
Python integers wrapped step by step, bit for bit: padding values, strides, batch, residuals,
multipliers and biases that wrap, the precise epilogue, both block layouts and many blocks."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.opdefs import OPS, qconv_fused, qops
from compiler.graph.opdefs.base import make_attrs
from compiler.graph.opdefs.qconv_fused import Epilogue, fused_qconv

LO32, HI32 = -(1 << 31), (1 << 31) - 1


def _wrap(v: np.ndarray) -> np.ndarray:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def _int64_conv(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], pads: tuple[int, ...], group: int,
                fill: int) -> np.ndarray:
    widths = ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))
    xp = np.pad(x.astype(np.int64), widths, constant_values=fill)
    m, cg, kh, kw = w.shape
    oh, ow = (xp.shape[2] - kh) // strides[0] + 1, (xp.shape[3] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], m, oh, ow), np.int64)
    mg = m // group
    for g in range(group):
        for dy in range(kh):
            for dx in range(kw):
                rows = slice(dy, dy + (oh - 1) * strides[0] + 1, strides[0])
                cols = slice(dx, dx + (ow - 1) * strides[1] + 1, strides[1])
                patch = xp[:, g * cg : (g + 1) * cg, rows, cols]
                taps = w[g * mg : (g + 1) * mg, :, dy, dx].astype(np.int64)
                out[:, g * mg : (g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, taps)
    return out


def _int64_epilogue(acc: np.ndarray, xs: list[np.ndarray], attrs: dict) -> np.ndarray:
    """The QConv contract (compiler/graph/opdefs/qops.py's module doc), one int64 step at a time."""
    b, m = (v.astype(np.int64).reshape(1, -1, 1, 1) for v in xs[2:4])
    shift = attrs["shift"]
    t = _wrap(acc + b)
    if attrs["split"]:
        lo_t, hi_t = (v.astype(np.int64).reshape(1, -1, 1, 1) for v in xs[4:6])
        y = (np.clip(t, lo_t, hi_t) * m + (1 << (shift - 1))) >> shift
    else:
        t = _wrap(t * m)
        if len(xs) == 5:
            t = _wrap(t + _wrap(xs[4].astype(np.int64) * attrs["mult_r"]))
        y = _wrap(t + (1 << (shift - 1))) >> shift if shift else t
    return np.clip(y, attrs["clip_lo"], attrs["clip_hi"]).astype(np.int8)


def _case(rng: np.random.Generator, x_shape: tuple[int, ...], w_shape: tuple[int, ...], group: int,
          strides: tuple[int, int], pads: tuple[int, ...], fill: int, shift: int, *, residual: bool = False,
          precise: bool = False) -> tuple[list[np.ndarray], dict]:
    x = rng.integers(-128, 128, x_shape, dtype=np.int8)
    w = rng.integers(-128, 128, w_shape, dtype=np.int8)
    k = w_shape[0]
    bias, mult = (rng.integers(LO32, HI32, k, dtype=np.int64).astype(np.int32) for _ in range(2))  # wrapping
    if shift == 0:  # unshifted: small factors, or every output is clipped
        bias, mult = rng.integers(-300, 300, k).astype(np.int32), rng.integers(-2, 3, k).astype(np.int32)
    attrs = make_attrs("QConv", {"strides": strides, "pads": pads, "group": group, "pad_value": fill,
                                      "shift": shift, "clip_lo": -100, "clip_hi": 90})
    xs: list[np.ndarray] = [x, w, bias, mult]
    if precise:  # y = clamp(t) * m >> 24 with m ~ 2**15: about t / 2**9, clamped near +-2**16
        xs[2] = rng.integers(-(1 << 14), 1 << 14, k).astype(np.int32)
        xs[3] = rng.integers(1 << 15, 1 << 16, k).astype(np.int32)
        xs.append(rng.integers(-(1 << 17), -(1 << 15), k).astype(np.int32))
        xs.append(rng.integers(1 << 15, 1 << 17, k).astype(np.int32))
        attrs = {**attrs, "split": 3, "shift": 24}
    out_hw = [(x_shape[2 + i] + pads[i] + pads[i + 2] - w_shape[2 + i]) // strides[i] + 1 for i in range(2)]
    if residual:
        xs.append(rng.integers(-128, 128, (x_shape[0], k, *out_hw), dtype=np.int8))
        attrs = {**attrs, "mult_r": int(rng.integers(LO32, HI32))}
    return xs, attrs


CASES = {  # x shape, w shape, group, strides, pads, pad value
    "dw3x3-s1-unsigned": ((1, 6, 9, 11), (6, 1, 3, 3), 6, (1, 1), (1, 1, 1, 1), -128),
    "dw5x5-s2-asym": ((2, 5, 12, 9), (5, 1, 5, 5), 5, (2, 2), (1, 2, 2, 1), 0),
    "dw-stride-3x2": ((1, 4, 9, 6), (4, 1, 3, 2), 4, (3, 2), (0, 0, 0, 0), 7),
    "dw-kernel-over-input": ((1, 2, 2, 3), (2, 1, 4, 4), 2, (1, 3), (2, 1, 3, 2), -5),
    "dw-s1-kernel-wider-than-input": ((1, 3, 4, 2), (3, 1, 3, 5), 3, (1, 1), (1, 0, 2, 3), 5),
    "dw1x1": ((1, 3, 2, 3), (3, 1, 1, 1), 3, (1, 1), (0, 0, 0, 0), 0),
    "pw-s1": ((2, 7, 5, 6), (9, 7, 1, 1), 1, (1, 1), (0, 0, 0, 0), 0),
    "pw-s2": ((1, 5, 7, 6), (3, 5, 1, 1), 1, (2, 2), (0, 0, 0, 0), -128),
    "pw-many-channels": ((1, 2100, 2, 3), (4, 2100, 1, 1), 1, (1, 1), (0, 0, 0, 0), 0),  # 3 float32 GEMMs
    "pw-wide": ((1, 8, 2, 2), (40, 8, 1, 1), 1, (1, 1), (0, 0, 0, 0), 0),
    # batches (bias correction runs a layer once on all its calibration inputs, stacked)
    "dw3x3-batch3": ((3, 4, 7, 8), (4, 1, 3, 3), 4, (1, 1), (1, 1, 1, 1), -128),
    "pw-s2-batch3": ((3, 6, 7, 6), (5, 6, 1, 1), 1, (2, 2), (0, 0, 0, 0), 0),
}


@pytest.mark.parametrize("block", [None, 64], ids=["one-block", "many-blocks"])
@pytest.mark.parametrize("epilogue", ["plain", "shift0", "residual", "precise"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_fused_qconv_is_the_integer_contract_bit_for_bit(case: str, epilogue: str, block: int | None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if block:  # blocks of a few elements: every layout, partial blocks, and buffers reused
        monkeypatch.setattr(qconv_fused, "BLOCK_ELEMS", block)
        monkeypatch.setattr(qconv_fused, "STACK_ELEMS", block * 4)
    x_shape, w_shape, group, strides, pads, fill = CASES[case]
    rng = np.random.default_rng(len(case) * 7 + len(epilogue))
    xs, attrs = _case(rng, x_shape, w_shape, group, strides, pads, fill, 0 if epilogue == "shift0" else 24,
                      residual=epilogue == "residual", precise=epilogue == "precise")
    want = _int64_epilogue(_int64_conv(xs[0], xs[1], strides, pads, group, fill), xs, attrs)
    got = fused_qconv(xs, attrs)
    assert got is not None and got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    if epilogue != "shift0":  # unshifted sums of products mostly clip
        assert len(np.unique(want)) > 2  # not only the clip bounds: the test sees the arithmetic


def test_extreme_accumulators_sum_exactly() -> None:
    """Sums of the largest products (|p| = 2**14) over 2100 channels pass float32's exact range
    2**24 in one sum: the GEMM chunks and int32 additions must still be exact."""
    rng = np.random.default_rng(3)
    xs, attrs = _case(rng, (1, 2100, 2, 2), (3, 2100, 1, 1), 1, (1, 1), (0, 0, 0, 0), 0, 0)
    xs[0] = np.full(xs[0].shape, -128, np.int8)
    xs[1] = np.full(xs[1].shape, -128, np.int8)
    xs[2], xs[3] = np.zeros(3, np.int32), np.ones(3, np.int32)
    attrs = {**attrs, "shift": 24, "clip_lo": -128, "clip_hi": 127}
    acc = _int64_conv(xs[0], xs[1], (1, 1), (0, 0, 0, 0), 1, 0)
    assert acc.max() > 1 << 24
    got = fused_qconv(xs, attrs)
    assert got is not None
    np.testing.assert_array_equal(got, _int64_epilogue(acc, xs, attrs))


def test_depthwise_kernels_past_float32s_exact_sums_take_the_general_path() -> None:
    """33 x 33 taps of the largest products sum past 2**24: float32 would round them."""
    rng = np.random.default_rng(9)
    xs, attrs = _case(rng, (1, 2, 33, 33), (2, 1, 33, 33), 2, (1, 1), (0, 0, 0, 0), 0, 24)
    xs[0][0, 0], xs[1][0] = -128, -128
    assert fused_qconv(xs, attrs) is None
    acc = _int64_conv(xs[0], xs[1], (1, 1), (0, 0, 0, 0), 2, 0)
    assert acc[0, 0, 0, 0] == 33 * 33 * (1 << 14) > 1 << 24
    np.testing.assert_array_equal(OPS["QConv"].evaluate(xs, attrs)[0], _int64_epilogue(acc, xs, attrs))


@pytest.mark.parametrize(("x_shape", "w_shape", "group", "pads"), [
    ((1, 4, 5, 5), (6, 4, 3, 3), 1, (1, 1, 1, 1)),  # dense 3x3
    ((1, 4, 5, 5), (4, 2, 3, 3), 2, (0, 0, 0, 0)),  # grouped, two channels per group
    ((1, 4, 5, 5), (6, 4, 1, 1), 1, (1, 0, 0, 1)),  # 1x1 with padding
])
def test_other_shapes_are_left_to_the_general_path(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                                                   group: int, pads: tuple[int, ...]) -> None:
    xs, attrs = _case(np.random.default_rng(5), x_shape, w_shape, group, (1, 1), pads, 0, 19)
    assert fused_qconv(xs, attrs) is None
    got = OPS["QConv"].evaluate(xs, attrs)[0]  # the general path: conv_acc, then the blocked epilogue
    want = _int64_epilogue(_int64_conv(xs[0], xs[1], (1, 1), pads, group, 0), xs, attrs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("residual", [False, True])
def test_blocked_epilogue_wraps_int64_accumulators_as_requantize(residual: bool,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qconv_fused, "BLOCK_ELEMS", 8)
    rng = np.random.default_rng(11)
    xs, attrs = _case(rng, (2, 5, 3, 4), (5, 1, 1, 1), 5, (1, 1), (0, 0, 0, 0), 0, 17, residual=residual)
    acc = rng.integers(-(1 << 36), 1 << 36, (2, 5, 3, 4), dtype=np.int64)  # unwrapped: conv_acc(wrap=False)
    got = qops.qconv_epilogue(acc, xs, attrs)
    np.testing.assert_array_equal(got, _int64_epilogue(acc, xs, attrs))
    r = xs[4] if residual else None
    mult_r = attrs["mult_r"]
    by_requantize = qops.requantize(acc, xs[2], xs[3], 17, -100, 90, residual=r, mult_r=mult_r)
    np.testing.assert_array_equal(got, by_requantize)
    assert Epilogue.of(xs, attrs).blocked(acc, r).tolist() == got.tolist()


@pytest.mark.parametrize("shift", [1, 3, 7])
@pytest.mark.parametrize("channels", [1, 2], ids=["depthwise", "pointwise"])
def test_rounding_ties_round_up(shift: int, channels: int) -> None:
    """Every int8 input through a 1x1 identity: y = floor((x + 2**(shift - 1)) / 2**shift), so
    each tie (x = (2j + 1) * 2**(shift - 1)) rounds up and the rounding constant is exact."""
    x = np.stack([np.arange(-128, 128, dtype=np.int8).reshape(16, 16)] * channels)[None]
    w = np.zeros((1, channels, 1, 1), np.int8)
    w[0, 0] = 1
    attrs = make_attrs("QConv", {"strides": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "shift": shift})
    xs: list[np.ndarray] = [x, w, np.zeros(1, np.int32), np.ones(1, np.int32)]
    got = fused_qconv(xs, attrs)
    assert got is not None
    want = [(v + (1 << (shift - 1))) >> shift for v in range(-128, 128)]  # Python ints: floor division
    assert got.ravel().tolist() == want
