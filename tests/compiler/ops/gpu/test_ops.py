"""GPU operators: parameter checks, schedule spaces whose every point lowers or says why not,
and the schedule helpers' refusals."""

from __future__ import annotations

import math

import pytest

from compiler.errors import ScheduleError
from compiler.ops.gpu import GPU_OPS, Conv2d, Eltwise, GpuOp, Knobs, MatMul, Softmax, Transpose, gpu_op
from compiler.ops.gpu.base import flat_launch, grid_launch
from compiler.ops.gpu.norm import row_launch
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import gpu_preset
from compiler.te.tensor import compute, placeholder

SM80 = gpu_preset("sm_80")


def test_registry_builds_by_name() -> None:
    op = gpu_op("matmul", batch=1, m=4, n=4, k=4)
    assert isinstance(op, MatMul) and set(GPU_OPS) >= {"conv2d", "matmul", "max_pool2d", "softmax"}


def test_registry_refusals() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU operator 'lstm'; known: conv2d, matmul"):
        gpu_op("lstm")
    with pytest.raises(ValueError, match=r"matmul: unknown parameters \['depth'\]; it takes batch, m, n, k"):
        gpu_op("matmul", batch=1, m=1, n=1, k=1, depth=2)


@pytest.mark.parametrize("make, message", [
    (lambda: MatMul(1, 0, 4, 4), r"matmul: m must be a positive int, not 0"),
    (lambda: Conv2d((1, 6, 8, 8), (8, 4, 3, 3), group=2),
     r"conv2d: weight \(8, 4, 3, 3\) does not take 6 channels in 2 groups"),
    (lambda: Conv2d((1, 4, 2, 2), (8, 4, 3, 3)), r"conv2d: a 3x3 window does not fit the padded 2x2 input"),
    (lambda: Eltwise("pow", (4,)), r"eltwise: unknown operation 'pow'; known: add, sub, mul, div, relu"),
    (lambda: Eltwise("add", (4,)), r"eltwise: add takes 2 operands"),
    (lambda: Eltwise("relu", (4,), (4,)), r"eltwise: relu takes 1 operands"),
    (lambda: Eltwise("add", (3,), (4,)), r"eltwise: shapes \(3,\) and \(4,\) do not broadcast"),
    (lambda: Transpose((2, 3), (0, 0)), r"transpose: perm \(0, 0\) is not a permutation of 2 axes"),
])
def test_parameter_errors(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        make().tensors()


SPACES = [MatMul(1, 64, 48, 32), Conv2d((1, 16, 14, 14), (32, 16, 3, 3), pad=(1, 1, 1, 1))]


@pytest.mark.parametrize("op", SPACES, ids=["matmul", "conv2d"])
def test_every_space_point_lowers_or_says_why(op: GpuOp) -> None:
    """A space lists legal schedules first; a point that does not fit raises ScheduleError (never
    another error), so a tuner may skip it."""
    lowered = 0
    for knobs in op.space(SM80)[:24]:
        try:
            kernel = op.lower(SM80, knobs)
        except ScheduleError as exc:
            assert str(exc)
            continue
        lowered += 1
        assert kernel.threads <= SM80.max_threads_per_block
    assert lowered >= 1


def test_defaults_occupy_every_sm_where_the_shape_allows() -> None:
    """The default is the first legal point with at least one block per SM: a 128x128 product
    in 64x64 tiles would be 4 blocks on 108 SMs."""
    op = MatMul(1, 128, 128, 128)
    knobs = op.default_knobs(SM80)
    assert knobs.shared and (knobs.tile_y, knobs.tile_x) == (8, 16)
    grid = op.lower(SM80, knobs).grid
    assert op.blocks(knobs) == grid[0] * grid[1] * grid[2] == 128 >= SM80.sm_count
    big = MatMul(1, 1024, 1024, 64)
    assert (big.default_knobs(SM80).tile_y, big.default_knobs(SM80).tile_x) == (64, 64)  # 256 blocks
    conv = Conv2d((1, 64, 56, 56), (64, 64, 3, 3), pad=(1, 1, 1, 1))
    kernel = conv.lower(SM80)
    assert kernel.grid[0] * kernel.grid[1] * kernel.grid[2] == conv.blocks(conv.default_knobs(SM80)) >= 108
    assert op.flops() == 2 * 128 ** 3
    conv = Conv2d((1, 64, 56, 56), (64, 64, 3, 3), pad=(1, 1, 1, 1))
    assert conv.flops() == 2 * 64 * 56 * 56 * 64 * 9


def test_no_point_fitting_is_a_schedule_error() -> None:
    op = Softmax((2, 3, 4, 5, 6))  # four row axes: the row launch takes three
    with pytest.raises(ScheduleError, match=r"softmax: no point of its schedule space fits sm_80"):
        op.default_knobs(SM80)


def _ew(shape: tuple[int, ...]) -> Schedule:
    x = placeholder(shape, "float32", "x")
    return Schedule(compute(shape, lambda *i: x[i] + 1.0, "out"))


def test_schedule_helper_refusals() -> None:
    with pytest.raises(ScheduleError, match=r"out: 15 elements \(of 1 lanes\) do not split into "
                                            r"blocks of 4 threads"):
        flat_launch(_ew((3, 5)), "out", 4)
    with pytest.raises(ScheduleError, match=r"out: 4 spatial axes; a grid launch takes at most 3"):
        grid_launch(_ew((2, 2, 2, 2)), "out", 4)
    with pytest.raises(ScheduleError, match=r"out: 0 row axes; a row launch takes 1 to 3"):
        row_launch(_ew((8,)), "out", 4)


def test_knobs_serialise() -> None:
    data = Knobs(tile_y=64, tile_x=32).to_json()
    assert data["tile_y"] == 64 and data["shared"] is True and math.isfinite(float(data["threads"]))  # type: ignore[arg-type]
