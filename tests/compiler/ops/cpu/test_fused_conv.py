"""The convolutions' fused epilogues and packed weights, the CPU target's graph-level work:
qconv2d's residual exactly, conv2d's residual and clip within float rounding, a packed weight
the same as the unpacked one."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ops.cpu import Conv2d, host_op
from compiler.ops.cpu.convbase import register_tile
from compiler.target.cpu import CpuTarget

SHAPES = [((1, 16, 9, 9), (16, 16, 3, 3), 1, 1), ((1, 8, 7, 7), (24, 8, 3, 3), 2, 1),
          ((1, 16, 6, 6), (16, 1, 3, 3), 1, 1)]


@pytest.mark.parametrize(("shape", "wshape", "stride", "pad"), SHAPES)
@pytest.mark.parametrize("packed", [False, True])
def test_qconv_residual_is_exact(shape: tuple[int, ...], wshape: tuple[int, ...], stride: int, pad: int,
                                 packed: bool) -> None:
    group = shape[1] if wshape[1] == 1 else 1
    if packed and group != 1:
        pytest.skip("a packed weight needs the channels schedule")
    op = host_op("qconv2d", shape=shape, weight_shape=wshape, strides=stride, pads=pad, group=group,
                 shift=9, residual=True, mult_r=-77, packed=packed)
    ins = op.random_inputs(3)
    assert np.array_equal(op.build()(*ins), op.reference(*ins))


@pytest.mark.parametrize(("shape", "wshape", "stride", "pad"), SHAPES)
def test_conv_residual_and_clip_within_rounding(shape: tuple[int, ...], wshape: tuple[int, ...], stride: int,
                                                pad: int) -> None:
    group = shape[1] if wshape[1] == 1 else 1
    op = host_op("conv2d", shape=shape, weight_shape=wshape, strides=stride, pads=pad, group=group, bias=True,
                 residual=True, act_lo=0.0, act_hi=6.0)
    ins = op.random_inputs(5)
    got, want = op.build()(*ins), op.reference(*ins)
    assert isinstance(got, np.ndarray) and got.min() >= 0.0 and got.max() <= 6.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_packed_weight_gives_the_unpacked_result() -> None:
    plain = Conv2d((1, 8, 10, 10), (16, 8, 3, 3), pads=1, bias=True)
    packed = Conv2d((1, 8, 10, 10), (16, 8, 3, 3), pads=1, bias=True, packed=True)
    data, weight, bias = plain.random_inputs(0)
    want = plain.build()(data, weight, bias)
    assert np.array_equal(want, packed.build()(data, packed.pack_weight(weight), bias))


def test_bad_fusion_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match=r"qconv2d: a fused residual takes the plain requantization, "
                                         r"not precise"):
        host_op("qconv2d", shape=(1, 8, 4, 4), weight_shape=(8, 8, 1, 1), shift=2, precise=True,
                residual=True)
    with pytest.raises(ValueError, match=r"conv2d: a packed weight needs the 'channels' schedule, "
                                         r"not 'rows'"):
        host_op("conv2d", shape=(1, 8, 4, 4), weight_shape=(8, 8, 1, 1), strategy="rows", packed=True)
    with pytest.raises(ValueError, match=r"conv2d: act_lo must be a number, not nan"):
        host_op("conv2d", shape=(1, 8, 4, 4), weight_shape=(8, 8, 1, 1), act_lo=float("nan"))
    with pytest.raises(ValueError, match=r"conv2d: residual must be a bool, not 1"):
        host_op("conv2d", shape=(1, 8, 4, 4), weight_shape=(8, 8, 1, 1), residual=1)


AVX2 = CpuTarget("x86_64-unknown-linux-gnu", "znver3", "+avx,+avx2,+fma")  # 16 ymm registers


@pytest.mark.parametrize(("width", "channels", "tile"), [  # pixels: a divisor of width, at most 8
    (56, 64, (8, 8)), (7, 512, (7, 8)), (28, 128, (7, 8)), (13, 64, (1, 8)), (12, 6, (4, None))])
def test_register_tile(width: int, channels: int, tile: tuple[int, int | None]) -> None:
    assert register_tile(width, channels, "float32", AVX2) == tile
