"""Element-wise ALU operators (residual add, clip) through the 8-bit accumulator load, exact."""

from __future__ import annotations

import pytest

from compiler.errors import ScheduleError
from compiler.ops import Eltwise, EltwiseKnobs, EltwiseSpec
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


@pytest.mark.rtl
@pytest.mark.parametrize("name", ["tiny", "rect", "vta"])
def test_residual_add_exact_on_rtl(name):
    from sim.rtl.backend import RtlSimulator

    cfg = PRESETS[name]
    t = AcceleratorTarget(cfg)
    op = Eltwise(EltwiseSpec("add", t.batch, 2 * t.block_out, 4, 6, (0, 127)), t)
    check_op(op, backend=RtlSimulator(cfg), knobs=EltwiseKnobs(tile_h=2, threads=2))


def test_elementwise_errors():
    t = AcceleratorTarget(PRESETS["rect"])
    with pytest.raises(ValueError, match="kind must be add or clip, not 'mul'"):
        EltwiseSpec("mul", 2, 16, 4, 4)
    with pytest.raises(ScheduleError, match="batch 3 is not a multiple of the core's batch 2"):
        Eltwise(EltwiseSpec("add", 3, 16, 4, 4), t)
