"""sim.alu against a direct sequential loop, hazards included."""

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hw import isa
from hw.config import PRESETS
from sim.alu import alu
from sim.conformance import alu_reference
from sim.scratchpads import Scratchpads

TINY = PRESETS["tiny"]


@st.composite
def alus(draw):
    n = draw(st.integers(1, 4))
    loop = {k: draw(st.integers(1, 4)) for k in ("iter_out", "iter_in")}
    factors = {f"{f}_factor_{lv}": draw(st.sampled_from([0, 1, 2, 3]))
               for f in ("dst", "src") for lv in ("out", "in")}
    uops = [isa.Uop(draw(st.integers(0, 30)), draw(st.integers(0, 30))) for _ in range(n)]
    op = draw(st.sampled_from(list(isa.AluOp)))
    insn = isa.Alu(uop_bgn=0, uop_end=n, alu_opcode=op, use_imm=draw(st.booleans()),
                   imm=draw(st.integers(-40, 40)), **loop, **factors)
    return insn, uops


def _sequential(insn, uops, acc, bits):
    """The ALU instruction run on a copy of `acc` one micro-op iteration at a time, in loop
    order, with the scalar reference at `bits`."""
    want = acc.astype(np.int64)
    for i in range(insn.iter_out):
        for j in range(insn.iter_in):
            for u in uops:
                d = u.dst + i * insn.dst_factor_out + j * insn.dst_factor_in
                s = u.src + i * insn.src_factor_out + j * insn.src_factor_in
                b = insn.imm if insn.use_imm else want[s]
                want[d] = alu_reference(insn.alu_opcode, want[d], b, bits)
    return want


@settings(max_examples=200, deadline=None)
@given(alus(), st.integers(0, 5))
def test_alu_matches_sequential_loops(case, seed):
    insn, uops = case
    rng = np.random.default_rng(seed)
    spads = Scratchpads(TINY, np.zeros(64, np.uint8))
    spads.acc[:] = rng.integers(-1000, 1000, spads.acc.shape)
    spads.sram[isa.MemType.UOP][: len(uops)] = isa.encode_uops(uops, TINY)
    want = _sequential(insn, uops, spads.acc, 32)
    assert alu(TINY, spads, insn) == insn.uop_iterations
    assert np.array_equal(spads.acc, want)


@settings(max_examples=120, deadline=None)
@given(alus(), st.integers(0, 5), st.sampled_from([16, 32]), st.integers(-(1 << 15), (1 << 15) - 1))
def test_alu_wraps_like_the_reference_at_full_range(case, seed, acc_bits, imm):
    """min/max/+/* run in acc's own type (sim.alu._NATIVE): the same as int64 wrapped to
    acc_bits, for accumulators anywhere in their range and any 16-bit immediate."""
    insn, uops = case
    insn = dataclasses.replace(insn, imm=imm)
    cfg = dataclasses.replace(TINY, acc_bits=acc_bits)
    rng = np.random.default_rng(seed)
    spads = Scratchpads(cfg, np.zeros(64, np.uint8))
    low, high = -(1 << (acc_bits - 1)), 1 << (acc_bits - 1)
    spads.acc[:] = rng.integers(low, high, spads.acc.shape)
    spads.sram[isa.MemType.UOP][: len(uops)] = isa.encode_uops(uops, cfg)
    want = _sequential(insn, uops, spads.acc, acc_bits)
    alu(cfg, spads, insn)
    assert np.array_equal(spads.acc, want)
