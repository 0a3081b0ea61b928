"""sim.replay: a replayed run gives the DRAM and counters of a step-by-step run (the ISA's
definition), on seeded random programs and on programs built to take each fused path."""

import dataclasses
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS
from hw.program import Program, ProgramBuilder
from sim.fsim import FunctionalSimulator
from sim.product import ProductKernel
from sim.random_programs import random_program
from sim.replay import Replay
from sim.replay_alu import AluOp
from sim.replay_ops import LoadOp, ProductOp, StepOp, StoreOp
from sim.scratchpads import int_dtype
from sim.workloads import GemmTiling, blocked_gemm, random_operands, resident_gemm

TINY, VTA = PRESETS["tiny"], PRESETS["vta"]


def _replays_like_fresh_runs(cfg, program: Program, inputs: list[dict]) -> Replay:
    """Record on inputs[0], replay each later one: DRAM and Stats equal a step-by-step run's."""
    sim = FunctionalSimulator(cfg)
    sim.run(program, inputs[0])
    for feeds in inputs[1:]:
        got, want = sim.run(program, feeds), FunctionalSimulator(cfg, replay=False).run(program, feeds)
        assert np.array_equal(got.dram, want.dram)
        assert got.stats == want.stats
    compiled = sim._traces[program].compiled
    assert compiled is not None  # the later runs were replays
    return compiled


def _other_inputs(inputs: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {k: rng.integers(np.iinfo(v.dtype).min, np.iinfo(v.dtype).max, v.shape, dtype=v.dtype,
                            endpoint=True) for k, v in inputs.items()}


@pytest.mark.parametrize("seed", range(10))
def test_replays_of_random_programs_equal_step_by_step_runs(preset_cfg, seed):
    """Two replays in a row on other inputs: the second starts from a fresh run's state too."""
    rp = random_program(preset_cfg, seed, tasks=seed % 5 + 1)
    feeds = [rp.inputs, _other_inputs(rp.inputs, seed), _other_inputs(rp.inputs, seed + 1000)]
    _replays_like_fresh_runs(preset_cfg, rp.program, feeds)


@pytest.mark.parametrize("tiling, fused_loads", [
    (GemmTiling(4, 4, 4, 2, 2, 2), False), (GemmTiling(4, 6, 4, 2, 3, 2, 2), True),
    (GemmTiling(2, 8, 6, 1, 4, 3), False), (GemmTiling(4, 4, 4, 4, 4, 4), False)])
def test_blocked_gemms_replay_with_fused_loads_and_assigned_resets(preset_cfg, tiling, fused_loads):
    """Double-buffered tiles load as fused runs; each tile's reset goes into its first GEMM."""
    work = blocked_gemm(preset_cfg, tiling)
    feeds = [work.inputs, random_operands(preset_cfg, tiling, 1), random_operands(preset_cfg, tiling, 2)]
    compiled = _replays_like_fresh_runs(preset_cfg, work.program, feeds)
    assert any(isinstance(op, LoadOp) and op.count > 1 for op in compiled.ops) == fused_loads
    assert any(isinstance(op, ProductOp) and op.assign for op in compiled.ops)


def test_a_reduction_longer_than_one_exact_chunk_replays_exactly():
    """80 terms of int8 products: more than float32 holds exactly in one sum (64 on vta)."""
    work = resident_gemm(VTA, m_tile=2, k_tile=80, n_tile=2, repeats=3)
    extreme = {k: np.full_like(v, -128) for k, v in work.inputs.items()}  # the largest sums
    compiled = _replays_like_fresh_runs(VTA, work.program, [work.inputs, extreme, work.inputs])
    kernels = [call for call in compiled._bound[2] if isinstance(call, ProductKernel)]  # type: ignore[index]
    assert kernels and all(len(k.chunks) == 2 for k in kernels)
    sim = FunctionalSimulator(VTA)
    sim.run(work.program, work.inputs)
    assert np.array_equal(sim.run(work.program, work.inputs).outputs["C"], work.expected["C"])


def _stores_program(cfg, *, delta: int, count: int = 4, x: int = 3) -> tuple[Program, dict]:
    """acc[0:count*x] loaded, then `count` STOREs of x elements each, `delta` DRAM elements apart."""
    b = ProgramBuilder(cfg)
    shape = (cfg.batch, cfg.block_out)
    data = np.arange(count * x * np.prod(shape)).reshape(1, count * x, *shape).astype(int_dtype(cfg.acc_bits))
    src = b.region("src", data.shape, data.dtype, "input")
    out = b.region("out", (1, (count - 1) * abs(delta) + x, *shape), int_dtype(cfg.out_bits), "output")
    b.load(isa.MemType.ACC, src, 0, y_size=1, x_size=count * x)
    b.nop(isa.Module.COMPUTE, push_next=True)
    for k in range(count):
        first = k * delta if delta >= 0 else (count - 1 - k) * -delta
        b.store(out, k * x, y_size=1, x_size=x, elem_offset=first, pop_prev=k == 0,
                push_prev=k == count - 1)
    b.finish(pop_next=True)
    return b.build(), {"src": data}


@pytest.mark.parametrize("delta, fused", [(3, True), (5, True), (-3, True), (2, False), (0, False)])
def test_consecutive_stores_fuse_only_where_their_dram_windows_are_disjoint(delta, fused):
    """Overlapping windows keep the order of the STOREs: the later one's bytes win."""
    program, feeds = _stores_program(TINY, delta=delta)
    compiled = _replays_like_fresh_runs(TINY, program, [feeds, _other_inputs(feeds, 1), feeds])
    stores = [op for op in compiled.ops if isinstance(op, StoreOp | StepOp)]
    assert (len(stores) == 1 and stores[0].count == 4) if fused else len(stores) == 4  # type: ignore[union-attr]


def test_an_accumulator_read_before_the_run_writes_it_is_zero_in_every_replay():
    """STORE acc, LOAD ACC over it, STORE again: the first STORE sees zeros each time."""
    b = ProgramBuilder(TINY)
    shape = (TINY.batch, TINY.block_out)
    data = np.full((1, 4, *shape), 7, int_dtype(TINY.acc_bits))
    src = b.region("src", data.shape, data.dtype, "input")
    before = b.region("before", (1, 4, *shape), int_dtype(TINY.out_bits), "output")
    after = b.region("after", (1, 4, *shape), int_dtype(TINY.out_bits), "output")
    b.store(before, 0, y_size=1, x_size=4, push_prev=True)
    b.load(isa.MemType.ACC, src, 0, y_size=1, x_size=4, pop_next=True)
    b.nop(isa.Module.COMPUTE, push_next=True)
    b.store(after, 0, y_size=1, x_size=4, pop_prev=True, push_prev=True)
    b.finish(pop_next=True)
    program = b.build()
    sim = FunctionalSimulator(TINY)
    for value in (7, -3, 5):
        result = sim.run(program, {"src": np.full_like(data, value)})
        assert not result.outputs["before"].any()
        assert (result.outputs["after"] == value).all()
    assert sim._traces[program].compiled is not None


def test_a_pickled_trace_holds_no_dram_and_replays_the_same():
    work = blocked_gemm(VTA, GemmTiling(4, 4, 4, 2, 2, 2))
    sim = FunctionalSimulator(VTA)
    first = sim.run(work.program, work.inputs)
    sim.run(work.program, work.inputs)  # replayed: compiled and bound
    trace = sim._traces[work.program]
    assert trace.compiled is not None and trace.compiled._bound is not None
    assert trace.compiled._bound[0].dram.size == 0  # the caller's DRAM is let go after a run
    copy = pickle.loads(pickle.dumps(trace))
    assert copy.compiled._bound is None
    dram = work.program.initial_dram(work.inputs)
    assert copy.replay(dram) == first.stats
    assert np.array_equal(dram, first.dram)


def _alu_program(cfg, clip: tuple[int, int]) -> tuple[Program, dict]:
    """acc[0:c*m] = x * scale[channel] + bias[channel] (operands broadcast over m pixels), twice
    with the scale reloaded and once with it rewritten in between, then MAX and MIN of `clip`."""
    c, m = 3, 4
    b = ProgramBuilder(cfg)
    shape = (cfg.batch, cfg.block_out)
    acc = int_dtype(cfg.acc_bits)
    rng = np.random.default_rng(5)
    feeds = {"x": rng.integers(-300, 300, (1, c * m, *shape)).astype(acc),
             "scale": rng.integers(-9, 9, (1, c, *shape)).astype(acc),
             "scale2": rng.integers(-9, 9, (1, c, *shape)).astype(acc),
             "bias": rng.integers(-99, 99, (1, c, *shape)).astype(acc)}
    regions = {name: b.region(name, v.shape, v.dtype, "input") for name, v in feeds.items()}
    out = b.region("out", (1, c * m, *shape), int_dtype(cfg.out_bits), "output")
    scale, bias = c * m, c * m + c  # acc bases of the operands
    b.load(isa.MemType.ACC, regions["x"], 0, y_size=1, x_size=c * m)
    b.load(isa.MemType.ACC, regions["scale"], scale, y_size=1, x_size=c)
    b.load(isa.MemType.ACC, regions["bias"], bias, y_size=1, x_size=c)
    spans = {base: b.uops([isa.Uop(dst=0, src=base)]) for base in (scale, bias)}
    imm_span = b.uops([isa.Uop(dst=0, src=0)])
    for span in (*spans.values(), imm_span):
        b.load_uops(span, sram_base=span.begin)

    def per_channel(op: isa.AluOp, base: int) -> None:
        span = spans[base]
        b.alu(uop_bgn=span.begin, uop_end=span.begin + 1, iter_out=c, iter_in=m, dst_factor_out=m,
              dst_factor_in=1, src_factor_out=1, src_factor_in=0, alu_opcode=op)

    def imm(op: isa.AluOp, value: int, base: int = 0, n: int = c * m) -> None:
        b.alu(uop_bgn=imm_span.begin, uop_end=imm_span.begin + 1, iter_out=1, iter_in=n,
              dst_factor_in=1, src_factor_in=1, alu_opcode=op, use_imm=True, imm=value)

    per_channel(isa.AluOp.MUL, scale)
    per_channel(isa.AluOp.ADD, bias)
    b.load(isa.MemType.ACC, regions["scale2"], scale, y_size=1, x_size=c)  # the operand changes
    per_channel(isa.AluOp.MUL, scale)
    per_channel(isa.AluOp.ADD, bias)
    span = b.uops([isa.Uop(dst=scale, src=0)])
    b.load_uops(span, sram_base=span.begin)
    b.alu(uop_bgn=span.begin, uop_end=span.begin + 1, iter_out=1, iter_in=c, dst_factor_in=1,
          src_factor_in=1, alu_opcode=isa.AluOp.ADD, use_imm=True, imm=3)  # written by an ALU
    per_channel(isa.AluOp.MUL, scale)
    imm(isa.AluOp.SHR, 2)
    imm(isa.AluOp.MAX, clip[0])
    imm(isa.AluOp.MIN, clip[1])
    b.nop(isa.Module.COMPUTE, push_next=True)
    b.store(out, 0, y_size=1, x_size=c * m, pop_prev=True, push_prev=True)
    b.finish(pop_next=True)
    return b.build(), feeds


@pytest.mark.parametrize("clip", [(-128, 127), (-5, 40), (50, -50)])
def test_alu_chains_replay_with_reused_operands_and_fused_clips(preset_cfg, clip):
    """The scale is reloaded and rewritten between uses, the bias is not; MAX then MIN is one
    op, also where the MAX's bound is above the MIN's."""
    program, feeds = _alu_program(preset_cfg, clip)
    compiled = _replays_like_fresh_runs(preset_cfg, program, [feeds, _other_inputs(feeds, 2),
                                                              _other_inputs(feeds, 3)])
    alus = [op for op in compiled.ops if isinstance(op, AluOp)]
    # the bias is copied once and reused; the scale changes before each use: no buffer kept
    assert [(op.step.op, op.refresh) for op in alus if op.key is not None] == \
        [(isa.AluOp.ADD, True), (isa.AluOp.ADD, False)]
    assert sum(op.clip_hi is not None for op in alus) == 1
    assert len(alus) == 8  # MAX and MIN fused


def test_replays_in_threads_at_once_each_give_their_own_result():
    """A Replay busy in one thread runs on SRAM of its own in another."""
    tiling = GemmTiling(4, 8, 4, 4, 4, 4)
    work = blocked_gemm(VTA, tiling)
    sim = FunctionalSimulator(VTA)
    sim.run(work.program, work.inputs)
    feeds = [random_operands(VTA, tiling, seed) for seed in range(4)]
    want = [FunctionalSimulator(VTA, replay=False).run(work.program, f).dram for f in feeds]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda k: sim.run(work.program, feeds[k % 4]).dram, range(80)))
    assert all(np.array_equal(g, want[k % 4]) for k, g in enumerate(got))


@pytest.mark.parametrize("bits", [(16, 8, 32), (8, 8, 16), (16, 16, 32)])
def test_replays_on_wider_operands_and_narrower_accumulators(bits):
    """tiny with 16-bit inputs: one term per exact float32 chunk; with a 16-bit acc: sums wrap in
    the narrower type; 16-bit inputs and weights: float64 products."""
    cfg = dataclasses.replace(TINY, inp_bits=bits[0], wgt_bits=bits[1], acc_bits=bits[2])
    work = resident_gemm(cfg, m_tile=2, k_tile=20, n_tile=2, repeats=2)
    extreme = {k: np.full_like(v, np.iinfo(v.dtype).min) for k, v in work.inputs.items()}
    _replays_like_fresh_runs(cfg, work.program, [work.inputs, extreme, _other_inputs(work.inputs, 4)])
    for seed in range(4):
        rp = random_program(cfg, seed)
        _replays_like_fresh_runs(cfg, rp.program, [rp.inputs, _other_inputs(rp.inputs, seed)])


def test_a_first_run_binds_its_replay_to_the_recording_machines_sram(monkeypatch):
    """The recording ran nothing but LOAD UOPs, so its Scratchpads are as fresh ones are: the
    replay adopts them (`Replay.adopt`) instead of allocating its own; the next inputs replay on
    them and give the step-by-step DRAM."""
    from sim import replay, scratchpads

    made = []

    class Counted(scratchpads.Scratchpads):
        def __init__(self, *args):
            made.append(self)
            super().__init__(*args)

    monkeypatch.setattr("sim.fsim.Scratchpads", Counted)
    monkeypatch.setattr(replay, "Scratchpads", Counted)
    work = blocked_gemm(VTA, GemmTiling(4, 4, 4, 2, 2, 2))
    sim = FunctionalSimulator(VTA)
    feeds = [work.inputs, random_operands(VTA, GemmTiling(4, 4, 4, 2, 2, 2), 5)]
    got = [sim.run(work.program, f) for f in feeds]
    bound = sim._traces[work.program].compiled._bound  # type: ignore[union-attr]
    assert len(made) == 1 and bound is not None and bound[0] is made[0] and bound[0].dram.size == 0
    for f, g in zip(feeds, got, strict=True):
        want = FunctionalSimulator(VTA, replay=False).run(work.program, f)
        assert np.array_equal(g.dram, want.dram) and g.stats == want.stats
