"""sim.gemm against a direct loop over micro-op iterations, on random shapes and loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hw import isa
from hw.config import PRESETS
from sim.gemm import GemmUnit
from sim.scratchpads import Scratchpads

TINY = PRESETS["tiny"]


def _machine(cfg, seed):
    rng = np.random.default_rng(seed)
    spads = Scratchpads(cfg, np.zeros(4096, np.uint8))
    for m in (isa.MemType.INP, isa.MemType.WGT):
        spads.sram[m][:] = rng.integers(-128, 128, spads.sram[m].shape)
        spads.mirror[m][:] = spads.sram[m]
    spads.acc[:] = rng.integers(-(1 << 31), 1 << 31, spads.acc.shape)
    return spads


def _reference(cfg, spads, insn, uops):
    acc = spads.acc.astype(np.int64)
    inp, wgt = spads.sram[isa.MemType.INP].astype(np.int64), spads.sram[isa.MemType.WGT]
    for i in range(insn.iter_out):
        for j in range(insn.iter_in):
            for u in uops:
                d = u.dst + i * insn.dst_factor_out + j * insn.dst_factor_in
                s = u.src + i * insn.src_factor_out + j * insn.src_factor_in
                w = u.wgt + i * insn.wgt_factor_out + j * insn.wgt_factor_in
                acc[d] = 0 if insn.reset else acc[d] + inp[s] @ wgt[w].astype(np.int64).T
    return ((acc + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


@st.composite
def gemms(draw):
    n = draw(st.integers(1, 6))
    loop = {k: draw(st.integers(1, 4)) for k in ("iter_out", "iter_in")}
    factors = {f"{f}_factor_{lv}": draw(st.sampled_from([0, 0, 1, 2, 5]))
               for f in ("dst", "src", "wgt") for lv in ("out", "in")}
    uops = [isa.Uop(draw(st.integers(0, 20)), draw(st.integers(0, 20)), draw(st.integers(0, 20)))
            for _ in range(n)]
    insn = isa.Gemm(reset=draw(st.booleans()) and draw(st.booleans()), uop_bgn=0, uop_end=n,
                    **loop, **factors)
    return insn, uops


@settings(max_examples=150, deadline=None)
@given(gemms(), st.integers(0, 10))
def test_gemm_matches_sequential_loops(case, seed):
    insn, uops = case
    spads = _machine(TINY, seed)
    spads.sram[isa.MemType.UOP][: len(uops)] = isa.encode_uops(uops, TINY)
    want = _reference(TINY, spads, insn, uops)
    counted = GemmUnit(TINY, spads).execute(insn)
    assert np.array_equal(spads.acc, want)
    assert counted == (0 if insn.reset else insn.uop_iterations)


@pytest.mark.parametrize("cfg_name", ["vta", "rect"])
def test_long_reductions_stay_exact(cfg_name):
    """A reduction longer than float32's exact range is cut into exact chunks."""
    cfg = PRESETS[cfg_name]
    spads = _machine(cfg, 3)
    for m in (isa.MemType.INP, isa.MemType.WGT):
        spads.sram[m][:] = -128
        spads.mirror[m][:] = -128
    k = min(300, cfg.wgt_depth - 1)  # k * block_in products of 2**14: beyond 2**24
    uops = [isa.Uop(dst=n, src=kk, wgt=n * (cfg.wgt_depth - k) + kk)
            for kk in range(k) for n in range(2)]
    spads.sram[isa.MemType.UOP][: len(uops)] = isa.encode_uops(uops, cfg)
    insn = isa.Gemm(uop_bgn=0, uop_end=len(uops), iter_out=2, dst_factor_out=2,
                    src_factor_out=k)
    want = _reference(cfg, spads, insn, uops)
    GemmUnit(cfg, spads).execute(insn)
    assert np.array_equal(spads.acc, want)
    assert spads.exact_terms < k  # the chunked path ran


# Shapes the compiler emits (EfficientNet-Lite1's 1x1 convolutions, scaled down): an outer loop
# over output channel blocks that moves dst and wgt (columns), micro-op groups that read the
# same weights from inputs a fixed distance apart (rows).
STRUCTURED = [
    (dict(iter_out=3, iter_in=4, dst_factor_out=16, dst_factor_in=2, src_factor_in=2, wgt_factor_out=2),
     [isa.Uop(dst=0, src=0, wgt=0), isa.Uop(dst=0, src=1, wgt=1), isa.Uop(dst=1, src=8, wgt=0),
      isa.Uop(dst=1, src=9, wgt=1)]),
    (dict(iter_out=3, iter_in=5, dst_factor_out=10, dst_factor_in=1, src_factor_in=1, wgt_factor_out=2),
     [isa.Uop(dst=0, src=0, wgt=0), isa.Uop(dst=0, src=5, wgt=1)]),
    (dict(iter_out=2, iter_in=3, dst_factor_out=1, src_factor_out=1, dst_factor_in=2, src_factor_in=6),
     [isa.Uop(dst=20 * g, src=4 * g + k, wgt=k) for g in range(3) for k in range(2)]),
]


@pytest.mark.parametrize(("loops", "uops"), STRUCTURED)
def test_compiler_shapes_take_the_matrix_product_path(loops, uops):
    spads = _machine(TINY, 5)
    spads.sram[isa.MemType.UOP][: len(uops)] = isa.encode_uops(uops, TINY)
    insn = isa.Gemm(uop_bgn=0, uop_end=len(uops), **loops)
    want = _reference(TINY, spads, insn, uops)
    unit = GemmUnit(TINY, spads)
    step = unit.prepare(insn)
    step(spads)
    assert np.array_equal(spads.acc, want)
    assert step.plan.general is None and len(step.plan.products) == 1


def test_machines_share_a_step_where_the_micro_ops_and_loops_are_the_same():
    """`sim.gemm.shared_step`: a second simulator running the Program (another object, as a
    model's Programs repeat tables) reuses the first one's GEMM and ALU steps; another micro-op
    table gets steps of its own; both give the step-by-step run's DRAM."""
    import dataclasses

    from sim.fsim import FunctionalSimulator
    from sim.gemm import GemmStep
    from sim.random_programs import random_program

    rp = random_program(TINY, 3, tasks=4)
    first, second = FunctionalSimulator(TINY), FunctionalSimulator(TINY)
    copy = dataclasses.replace(rp.program, insns=rp.program.insns.copy())
    first.run(rp.program, rp.inputs)
    got = second.run(copy, rp.inputs)
    a, b = first._traces[rp.program].steps, second._traces[copy].steps
    gemms = [k for k, step in enumerate(a) if isinstance(step, GemmStep)]
    assert gemms and all(a[k] is b[k] for k in gemms)
    want = FunctionalSimulator(TINY, replay=False).run(copy, rp.inputs)
    assert np.array_equal(got.dram, want.dram) and got.stats == want.stats
    table = rp.program.regions_with_role("uops")[0]
    words = rp.program.constants[table.name].copy()
    words.reshape(-1)[0] ^= 1  # the first micro-op's dst moves by one
    other = dataclasses.replace(rp.program, constants={**rp.program.constants, table.name: words})
    third = FunctionalSimulator(TINY)
    got = third.run(other, rp.inputs)
    c = third._traces[other].steps
    assert len(c) == len(a) and sum(c[k] is not a[k] for k in gemms) == 1
    want = FunctionalSimulator(TINY, replay=False).run(other, rp.inputs)
    assert np.array_equal(got.dram, want.dram) and got.stats == want.stats
