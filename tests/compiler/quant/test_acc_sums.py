"""Per-channel accumulator sums from a layer's input alone: the integer sums of the wrapped
accumulator `qops` computes, exactly, for every shape bias correction meets."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.ir import AttrValue
from compiler.graph.opdefs.qops import gemm_acc, qconv_acc
from compiler.quant.acc_sums import channel_sums


def _int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _acc_sums(x: np.ndarray, w: np.ndarray, attrs: dict[str, AttrValue]) -> np.ndarray:
    return qconv_acc(x, w, attrs, dtype=np.int32).sum(axis=(0, 2, 3), dtype=np.int64)  # type: ignore[no-any-return]


Case = tuple[list[np.ndarray], np.ndarray, dict[str, AttrValue]]


def _case(rng: np.random.Generator, long_rows: bool) -> Case:
    group = int(rng.choice([1, 2, 3]))
    cpg, kpg = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    strides = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    pads = tuple(int(p) for p in rng.integers(0, 4, size=4))
    h = int(rng.integers(max(1, kh - pads[0] - pads[2]), 12))
    width = int(rng.integers(32, 60)) if long_rows else int(rng.integers(max(1, kw - pads[1] - pads[3]), 12))
    shape = (int(rng.integers(1, 3)), group * cpg, h, width)
    fill = int(rng.choice([0, -128, 7]))
    attrs: dict[str, AttrValue] = {"strides": strides, "pads": pads, "group": group, "pad_value": fill}
    return [_int8(rng, shape) for _ in range(2)], _int8(rng, (group * kpg, cpg, kh, kw)), attrs


@pytest.mark.parametrize("long_rows", [False, True])
def test_conv_channel_sums_are_the_accumulators_sums(long_rows: bool) -> None:
    rng = np.random.default_rng(11 + long_rows)
    for _ in range(120):
        xs, w, attrs = _case(rng, long_rows)
        got = channel_sums("QConv", np.concatenate(xs), w, attrs, len(xs))
        assert got is not None
        assert got.shape == (len(xs), w.shape[0])
        for x, sums in zip(xs, got, strict=True):
            np.testing.assert_array_equal(sums, _acc_sums(x, w, attrs), err_msg=str(attrs))


def test_depthwise_channel_sums_at_full_scale() -> None:
    rng = np.random.default_rng(3)
    x = np.full((1, 6, 80, 80), -128, np.int8)  # every product 2**14: a sum past int32
    w = np.full((6, 1, 5, 5), -128, np.int8)
    attrs: dict[str, AttrValue] = {"strides": (1, 1), "pads": (2, 2, 2, 2), "group": 6, "pad_value": -128}
    xs = [x, _int8(rng, x.shape)]
    got = channel_sums("QConv", np.concatenate(xs), w, attrs, 2)
    assert got is not None
    assert int(got[0][0]) == 80 * 80 * 25 * (1 << 14) > 1 << 31
    for xi, sums in zip(xs, got, strict=True):
        np.testing.assert_array_equal(sums, _acc_sums(xi, w, attrs))


def test_dense_channel_sums_are_the_accumulators_sums() -> None:
    rng = np.random.default_rng(5)
    xs, w = [_int8(rng, (7, 33)) for _ in range(3)], _int8(rng, (5, 33))
    got = channel_sums("QGemm", np.concatenate(xs), w, {}, 3)
    assert got is not None
    for x, sums in zip(xs, got, strict=True):
        np.testing.assert_array_equal(sums, gemm_acc(x, w).sum(axis=0))


def test_no_sums_where_they_could_differ_from_the_wrapped_accumulator() -> None:
    rng = np.random.default_rng(6)
    attrs: dict[str, AttrValue] = {"strides": (1, 1), "pads": (0, 0, 0, 0), "group": 1, "pad_value": 0}
    x, w = _int8(rng, (1, 3, 4, 4)), _int8(rng, (2, 3, 1, 1))
    assert channel_sums("QConv", x.astype(np.int32), w, attrs) is None  # not int8
    assert channel_sums("QConv", x, w.astype(np.int16), attrs) is None
    wide = np.zeros((1, 1 << 17, 1, 1), np.int8)  # 2**17 products of 2**14 may leave int32
    assert channel_sums("QConv", np.zeros((1, 1 << 17, 1, 1), np.int8), wide, attrs) is None
    big = np.zeros((1, 1, 1 << 11, 1 << 12), np.int8)  # more than 2**22 values per channel
    assert channel_sums("QConv", big, np.zeros((1, 1, 1, 1), np.int8), attrs) is None
    long_rows = np.zeros((4, 1 << 17), np.int8)
    assert channel_sums("QGemm", long_rows, np.zeros((2, 1 << 17), np.int8), {}) is None
    assert channel_sums("QAdd", x, w, attrs) is None
    assert channel_sums("QConv", np.concatenate([x, x]), w, attrs, 3) is None  # 2 images in 3 inputs
