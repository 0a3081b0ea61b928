"""TensorAlu against sim.conformance.alu_reference, exact, including negative shifts."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw import isa
from hw.config import PRESETS
from hw.rtl.alu import TensorAlu
from sim.conformance import alu_reference
from tests.hw.rtl.test_gemm import pack, unpack


@pytest.mark.parametrize("op", list(isa.AluOp))
def test_alu_op_matches_reference(op: isa.AluOp) -> None:
    cfg = PRESETS["tiny"]
    lanes, bits = cfg.batch * cfg.block_out, cfg.acc_bits
    dut = TensorAlu(cfg)
    rng = np.random.default_rng(int(op))
    pairs = [(rng.integers(-(1 << 31), 1 << 31, lanes), rng.integers(-(1 << 31), 1 << 31, lanes))
             for _ in range(6)]
    # shift amounts at the boundaries: -32 (all shifted out), -1, 0, 31
    pairs.append((np.array([-7, 123456, -(1 << 31), (1 << 31) - 1]), np.array([-32, -1, 0, 31])))
    pairs.append((rng.integers(-1000, 1000, lanes), rng.integers(-40, 40, lanes)))

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        ctx.set(dut.op, op)
        for a, b in pairs:
            ctx.set(dut.a, pack(a, bits))
            ctx.set(dut.b, pack(b, bits))
            got = unpack(ctx.get(dut.result), lanes, bits)
            np.testing.assert_array_equal(got, alu_reference(op, a, b, bits), err_msg=f"{a} {b}")
        # use_imm: every lane's b is imm, whatever the b vector holds
        ctx.set(dut.use_imm, 1)
        for imm in (-32, -5, -1, 0, 3, 31, -(1 << 31), (1 << 31) - 1):
            a = pairs[0][0]
            ctx.set(dut.a, pack(a, bits))
            ctx.set(dut.imm, imm & ((1 << bits) - 1))
            got = unpack(ctx.get(dut.result), lanes, bits)
            want = alu_reference(op, a, np.full(lanes, imm), bits)
            np.testing.assert_array_equal(got, want, err_msg=f"imm {imm}")

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
