"""The host's float32 convolution (conv2d) against a float64 numpy reference and against the graph
interpreter's Conv: every group form and schedule, strides, asymmetric padding, with and without
bias.

Tolerance: each output must lie within (C/group * R * S + 2) * 2**-23 * (sum |data * weight| +
|bias|) of the exact value, twice the classic bound for a float32 sum of products in any order
(gamma_n, unit roundoff 2**-24), the float32 rounding of the reference included; so the check
holds for every seed.  The interpreter (float32 BLAS, another order) is within the same bound,
so the kernel must be within twice it of the interpreter.  On standard normal data the bound is
about 1e-5 while a wrong tap, channel or bias errs by O(1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.graph.opdefs import OPS, make_attrs
from compiler.ops.cpu import Conv2d
from compiler.ops.cpu.convbase import conv_reference64
from tests.compiler.ops.cpu.util import (
    BAD_CONV_PARAMETERS,
    CONV,
    assert_conv_parameters_normalise,
    kernel_of,
)


def error_bound(op: Conv2d, inputs: list[np.ndarray]) -> np.ndarray:
    data, weight, *bias = inputs
    size = conv_reference64(np.abs(data), np.abs(weight), op.stride_hw, op.pad_tlbr, op.group)
    if bias:
        size = size + np.abs(bias[0].astype(np.float64))[:, None, None]
    return (math.prod(op.weight_shape[1:]) + 2) * 2.0**-23 * size  # type: ignore[no-any-return]


def interpreted(op: Conv2d, inputs: list[np.ndarray]) -> np.ndarray:
    """The graph interpreter's ONNX Conv (pads in ONNX order: top, left, bottom, right)."""
    window = {"strides": op.strides, "pads": op.pads, "dilations": (1, 1)}
    attrs = make_attrs("Conv", {**window, "group": op.group})
    (out,) = OPS["Conv"].evaluate(inputs, attrs)
    return out  # type: ignore[no-any-return]


def assert_close(op: Conv2d, inputs: list[np.ndarray]) -> np.ndarray:
    got = kernel_of(op)(*inputs)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == op.out_shape
    bound = error_bound(op, inputs)
    for want, limit in ((op.reference(*inputs), bound), (interpreted(op, inputs), 2 * bound)):
        excess = np.abs(got.astype(np.float64) - want) - limit
        assert excess.max() <= 0, f"{op}: {int(np.sum(excess > 0))} of {got.size} outside the bound"
    return got


FORMS = ("dense", "depthwise", "multiplier", "grouped")


def random_conv(seed: int) -> Conv2d:
    """A seeded convolution of form FORMS[seed % 4]; seed // 4 cycles through its schedules and
    alternates the bias, the rest (sizes, strides 1-3, pads 0-3 on each side) is drawn."""
    rng = np.random.default_rng(seed)
    form, turn = FORMS[seed % 4], seed // 4

    def pick(*options: int) -> int:
        return int(rng.choice(options))

    if form == "dense":
        c, group, k = pick(1, 2, 3, 4, 7), 1, pick(1, 3, 4, 8, 17, 32)
    elif form == "depthwise":
        c = group = k = pick(1, 3, 4, 8, 16)
    elif form == "multiplier":  # K = C * m, one input channel per group
        c = group = pick(2, 3, 5)
        k = c * pick(2, 3)
    else:
        group = pick(2, 3)
        c, k = group * pick(2, 3), group * pick(1, 2, 3)
    r, s = pick(1, 2, 3, 4), pick(1, 2, 3, 4)
    pads = tuple(pick(0, 1, 2, 3) for _ in range(4))
    h, w = (int(rng.integers(max(1, size - pads[i] - pads[i + 2]), 13)) for i, size in enumerate((r, s)))
    strides = (pick(1, 2, 3), pick(1, 2))
    legal = ["auto", "rows"] + ["channels"] * (group == 1) + ["depthwise"] * (c == k == group)
    return Conv2d((pick(1, 2), c, h, w), (k, c // group, r, s), strides, pads, group, turn % 2 == 1,
                  legal[turn % len(legal)])


@pytest.mark.parametrize("seed", range(20))
def test_random_convolutions(seed):
    op = random_conv(seed)
    assert_close(op, op.random_inputs(seed))


# Shape classes of the zoo models' float stems (smaller images) and of the other schedules.
ZOO = {
    "resnet18 conv1": Conv2d((1, 3, 20, 20), (64, 3, 7, 7), 2, 3, bias=True),
    "mobilenetv2 first conv": Conv2d((1, 3, 17, 17), (32, 3, 3, 3), 2, 1, bias=True),
    "tf same padding": Conv2d((1, 3, 16, 16), (32, 3, 3, 3), 2, (0, 0, 1, 1)),  # odd width: block 1
    "depthwise s1 wide": Conv2d((1, 16, 32, 32), (16, 1, 3, 3), 1, 1, 16, bias=True),  # rows, x16
    "depthwise s2 narrow": Conv2d((1, 32, 15, 15), (32, 1, 3, 3), 2, (0, 0, 1, 1), 32),  # depthwise
    "grouped": Conv2d((1, 12, 10, 10), (8, 3, 3, 3), 1, 1, 4, bias=True),  # rows
}


def test_zoo_shape_classes_take_the_intended_schedules():
    strategies = {name: op.chosen_strategy for name, op in ZOO.items()}
    assert strategies == {
        "resnet18 conv1": "channels", "mobilenetv2 first conv": "channels", "tf same padding": "channels",
        "depthwise s1 wide": "rows", "depthwise s2 narrow": "depthwise", "grouped": "rows"}


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_shape_classes_are_close_and_compile_quietly(name, capfd):
    op = ZOO[name]
    for seed in range(2):
        assert_close(op, op.random_inputs(seed))
    assert "not vectorized" not in capfd.readouterr().err  # LLVM followed every vectorize hint
    assert "x float>" in kernel_of(op).optimized_ir


def test_hand_computed_values():
    """A 2x2 kernel of ones over 1..9 (3x3), pads (top 1, left 0, bottom 0, right 1), stride 2,
    bias 0.5: windows at rows -1, 1 and columns 0, 2 (column 3 is padding)."""
    op = Conv2d((1, 1, 3, 3), (1, 1, 2, 2), 2, (1, 0, 0, 1), bias=True)
    data = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    weight = np.ones((1, 1, 2, 2), np.float32)
    got = assert_close(op, [data, weight, np.array([0.5], np.float32)])
    assert got[0, 0].tolist() == [[1 + 2 + 0.5, 3 + 0.5], [4 + 5 + 7 + 8 + 0.5, 6 + 9 + 0.5]]


def test_padding_only_windows_give_the_bias():
    op = Conv2d((1, 2, 2, 2), (3, 2, 1, 1), 1, 2, bias=True)  # 1x1 kernel, 2 rows of pad each side
    data, weight, bias = op.random_inputs(3)
    got = assert_close(op, [data, weight, bias])
    assert np.array_equal(got[0, :, 0, :], np.broadcast_to(bias[:, None], (3, 6)))


def test_parameters_normalise_so_equal_convolutions_share_a_kernel():
    assert_conv_parameters_normalise(Conv2d)
    a = Conv2d((1, 4, 6, 6), (4, 1, 3, 3), 1, 1, 4, np.bool_(False))
    assert a.bias is False and a == Conv2d((1, 4, 6, 6), (4, 1, 3, 3), 1, 1, 4)


@pytest.mark.parametrize("params,message", BAD_CONV_PARAMETERS + [
    (CONV | dict(bias=1), "bias must be a bool, not 1"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message) as err:
        Conv2d(**params)
    assert str(err.value).startswith("conv2d: ")
