"""Element-wise ALU operators (residual add, clip) through the 8-bit accumulator load, exact."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import ScheduleError
from compiler.ops.accel import Eltwise, EltwiseKnobs, EltwiseSpec
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from tests.compiler.conftest import CONFIGS, check_op


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c.name for c in CONFIGS])
@pytest.mark.parametrize("kind,clip", [("add", (-128, 127)), ("add", (0, 127)), ("clip", (0, 90))])
def test_elementwise_exact_on_fsim(cfg, kind, clip):
    t = AcceleratorTarget(cfg)
    op = Eltwise(EltwiseSpec(kind, 2 * t.batch, 3 * t.block_out - 1, 6, 5, clip), t)
    for knobs in (None, EltwiseKnobs(tile_h=1, threads=2), EltwiseKnobs(tile_h=2, threads=1)):
        result = check_op(op, knobs=knobs, fsim_seed=7)
    operands = 2 if kind == "add" else 1
    assert result.stats.acc_load_bytes == operands * op.nb * op.cb * 30 * cfg.out_elem_bytes


# (mult_a, mult_b, shift, clip): rescaled residual adds of a quantized network, and a requantize
# (a shift beyond 16 rounds in two steps: its one-step constant would not fit an ALU immediate)
RESCALED = [(300, -200, 9, (0, 127)), (1, 77, 6, (-128, 127)), (-5000, 20000, 15, (-100, 100)),
            (32767, -32768, 21, (-128, 127)), (5_000_000, -3_100_007, 23, (-128, 127)),
            (40_000, 1, 16, (0, 127))]  # (the last two beyond an immediate: vector operands)


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c.name for c in CONFIGS])
@pytest.mark.parametrize("mult_a,mult_b,shift,clip", RESCALED)
def test_rescaled_add_exact_on_fsim(cfg, mult_a, mult_b, shift, clip):
    t = AcceleratorTarget(cfg)
    op = Eltwise(EltwiseSpec("add", t.batch, 2 * t.block_out + 1, 4, 3, clip, mult_a, mult_b, shift), t)
    assert ("b_scaled" in op.schedule(op.default_knobs()).stages) == (mult_b != 1)
    for knobs in (None, EltwiseKnobs(tile_h=1, threads=2)):
        check_op(op, knobs=knobs, fsim_seed=3)
    requant = Eltwise(EltwiseSpec("clip", t.batch, t.block_out, 4, 4, clip, mult_a, 1, shift), t)
    check_op(requant)


def test_rescaled_add_reference_by_hand():
    op = Eltwise(EltwiseSpec("add", 1, 16, 1, 1, (-128, 127), 3, -2, 2), AcceleratorTarget(PRESETS["vta"]))
    a, b = np.full(op.tensors()["a"].shape, 9, np.int8), np.full(op.tensors()["b"].shape, 100, np.int8)
    # 9*3 + 100*(-2) = -173; + 2 (rounding) = -171; >> 2 = -43 (floor)
    assert (op.reference({"a": a, "b": b}) == -43).all()


@pytest.mark.rtl
@pytest.mark.parametrize("name", ["tiny", "rect", "vta"])
def test_residual_add_exact_on_rtl(name):
    from sim.rtl.backend import RtlSimulator

    cfg = PRESETS[name]
    t = AcceleratorTarget(cfg)
    sim = RtlSimulator(cfg)
    op = Eltwise(EltwiseSpec("add", t.batch, 2 * t.block_out, 4, 6, (0, 127)), t)
    check_op(op, backend=sim, knobs=EltwiseKnobs(tile_h=2, threads=2))
    for mult_a, mult_b, shift, clip in (RESCALED[0], RESCALED[4]):
        op = Eltwise(EltwiseSpec("add", t.batch, 2 * t.block_out, 4, 6, clip, mult_a, mult_b, shift), t)
        check_op(op, backend=sim, knobs=EltwiseKnobs(tile_h=2, threads=2))


def test_elementwise_errors():
    t = AcceleratorTarget(PRESETS["rect"])
    with pytest.raises(ValueError, match="kind must be add or clip, not 'mul'"):
        EltwiseSpec("mul", 2, 16, 4, 4)
    with pytest.raises(ValueError, match=r"element-wise shift must be in \[0, 31\], not 32"):
        EltwiseSpec("add", 2, 16, 4, 4, shift=32)
    with pytest.raises(ValueError, match="element-wise clip has one operand: mult_b does not apply"):
        EltwiseSpec("clip", 2, 16, 4, 4, mult_b=3)
    with pytest.raises(ValueError, match="element-wise mult_a 2147483648 does not fit int32"):
        EltwiseSpec("add", 2, 16, 4, 4, mult_a=1 << 31)
    with pytest.raises(ScheduleError, match="batch 3 is not a multiple of the core's batch 2"):
        Eltwise(EltwiseSpec("add", 3, 16, 4, 4), t)
