"""The timing backend without Verilator: functional counters, errors, fast path, traces.

Its cycle fidelity against the RTL is pinned in tests/sim/test_fidelity.py.
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS
from hw.program import ProgramBuilder
from sim import backends
from sim.backend import InvalidProgramError, SimulationError
from sim.fsim import FunctionalSimulator
from sim.random_programs import random_program
from sim.timing import TimingSimulator, build, decode
from sim.timing.selftest import run_timing_suite
from sim.trace import DMA_TRACKS, MODULE_TRACKS, QUEUES
from sim.workloads import GemmTiling, blocked_gemm
from tests.sim.straddling import crossing_dmas, straddling

STRESS = PRESETS["tiny"].with_params(
    name="stress", batch=4, block_in=4, block_out=8, inp_bytes=4096, wgt_bytes=8192,
    acc_bytes=8192, bus_bits=256, max_burst_beats=4, mem_inflight=1, token_counter_bits=2,
    cmd_queue_depth=2,
)
CONFIGS = [PRESETS["vta"], PRESETS["tiny"], PRESETS["rect"], STRESS]


@pytest.fixture(params=CONFIGS, ids=[c.name for c in CONFIGS])
def cfg(request):
    return request.param


def test_registered_as_a_backend():
    assert "timing" in backends.NAMES
    sim = backends.make_backend("timing", PRESETS["tiny"], dram_latency_cycles=3)
    assert isinstance(sim, TimingSimulator) and sim.dram_latency_cycles == 3


def test_conformance_suite_timing_checks_pass(cfg):
    report = run_timing_suite(TimingSimulator(cfg))
    assert report.failed == 0, [r for r in report.results if not r.passed]


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_functional_counters_equal_fsim(cfg, seed):
    rp = random_program(cfg, seed)
    want = FunctionalSimulator(cfg).run(rp.program, rp.inputs).stats.functional()
    stats = TimingSimulator(cfg, dram_latency_cycles=1 + seed).run(rp.program).stats
    assert stats.functional() == want
    assert stats.cycles is not None and stats.cycles > 0
    for module in ("load", "compute", "store"):
        busy, stall = getattr(stats, f"{module}_busy_cycles"), getattr(stats, f"{module}_stall_cycles")
        assert 0 <= busy <= stats.cycles and 0 <= stall <= stats.cycles


def test_needs_no_inputs_and_returns_no_data():
    cfg = PRESETS["tiny"]
    work = blocked_gemm(cfg, GemmTiling(4, 4, 4, 2, 2, 2, 2))
    with_inputs = TimingSimulator(cfg).run(work.program, work.inputs)
    without = TimingSimulator(cfg).run(work.program)
    assert with_inputs.stats == without.stats and without.outputs == {} and without.dram.size == 0


@pytest.mark.parametrize(("latency", "bandwidth"), [(1, 1), (8, 4), (64, 8), (150, 16)])
@pytest.mark.parametrize("seed", range(12))
def test_fast_path_equals_cycle_stepping(cfg, seed, latency, bandwidth):
    rp = random_program(cfg, 100 + seed)
    fast = TimingSimulator(cfg, dram_latency_cycles=latency, dram_bytes_per_cycle=bandwidth)
    slow = TimingSimulator(cfg, dram_latency_cycles=latency, dram_bytes_per_cycle=bandwidth,
                           fast=False)
    assert fast.run(rp.program).stats == slow.run(rp.program).stats


def test_fast_path_equals_cycle_stepping_on_a_long_gemm(cfg):
    t = GemmTiling(8, 8, 4, 4, 4, 2, 2) if cfg.block_in >= 8 else GemmTiling(16, 16, 8, 8, 4, 4, 2)
    work = blocked_gemm(cfg, t)
    for latency in (2, 64):
        fast = TimingSimulator(cfg, dram_latency_cycles=latency).run(work.program).stats
        slow = TimingSimulator(cfg, dram_latency_cycles=latency, fast=False).run(work.program).stats
        assert fast == slow


@pytest.mark.parametrize("seed", range(4))
def test_dmas_across_4_kib_fast_path_equals_cycle_stepping(cfg, seed):
    """Bursts cut at 4 KiB boundaries (tests/sim/rtl/test_burst_boundary.py pins the cycles to
    the RTL's): the fast paths agree with cycle stepping, the counters with fsim."""
    program, inputs = straddling(cfg, seed)
    assert sum(crossing_dmas(program, cfg).values()) >= 1
    want = FunctionalSimulator(cfg).run(program, inputs).stats.functional()
    for latency, bandwidth in ((1, cfg.bus_bytes), (64, 8)):
        fast = TimingSimulator(cfg, dram_latency_cycles=latency, dram_bytes_per_cycle=bandwidth)
        slow = TimingSimulator(cfg, dram_latency_cycles=latency, dram_bytes_per_cycle=bandwidth,
                               fast=False)
        stats = fast.run(program).stats
        assert stats == slow.run(program).stats and stats.functional() == want


def test_latency_and_bandwidth_move_the_cycle_count():
    cfg = PRESETS["vta"]
    work = blocked_gemm(cfg, GemmTiling(8, 8, 4, 4, 4, 2, 2))

    def cycles(**dram):
        return TimingSimulator(cfg, **dram).run(work.program).stats.cycles

    assert cycles(dram_latency_cycles=200) > cycles(dram_latency_cycles=10) + 190
    assert cycles(dram_bytes_per_cycle=1) > 4 * cycles(dram_bytes_per_cycle=8)


# -- errors ---------------------------------------------------------------------------------------


def test_deadlock_names_the_blocked_instructions():
    cfg = PRESETS["tiny"]
    b = ProgramBuilder(cfg)
    b.nop(isa.Module.LOAD, pop_next=True, push_next=True)
    b.nop(isa.Module.COMPUTE, pop_prev=True, push_prev=True)
    b.finish()
    with pytest.raises(SimulationError, match="deadlock: no module can proceed") as info:
        TimingSimulator(cfg, validate=False).run(b.build(check_tokens=False))
    text = str(info.value)
    assert "load: blocked at #0 NOP-LOAD" in text and "waiting for a compute->load token" in text
    assert "compute: blocked at #1 NOP-COMPUTE" in text and "store: idle (queue empty)" in text
    assert "token counts: l2c=0 c2l=0 c2s=0 s2c=0" in text


def test_finish_before_other_instructions_is_an_error():
    cfg = PRESETS["tiny"]
    b = ProgramBuilder(cfg)
    b.nop(isa.Module.LOAD, push_next=True)
    b.finish()
    b.nop(isa.Module.STORE)
    with pytest.raises(SimulationError, match="FINISH executed before other instructions") as info:
        TimingSimulator(cfg, validate=False).run(b.build(check_tokens=False))
    assert "store: still holds #2 NOP-STORE" in str(info.value)


def test_cycle_limit():
    cfg = PRESETS["tiny"]
    work = blocked_gemm(cfg, GemmTiling(4, 4, 4, 2, 2, 2, 2))
    with pytest.raises(SimulationError, match="timing: no FINISH within max_cycles=100"):
        TimingSimulator(cfg, max_cycles=100).run(work.program)  # 80 micro-ops: it could finish
    with pytest.raises(InvalidProgramError, match=r"^timing: the program runs 80 micro-op iterations, "
                                                  r"so it needs at least 80 cycles, more than "
                                                  r"max_cycles=79$"):
        TimingSimulator(cfg, max_cycles=79).run(work.program)  # refused before it starts


def _one(cfg, insn, *, region_elems=64):
    """A program of `insn` then FINISH, with a DRAM region of `region_elems` acc elements."""
    b = ProgramBuilder(cfg)
    b.region("X", (region_elems, cfg.batch, cfg.block_out), np.int32, "input")
    b.emit(insn)
    b.finish()
    return b.build(check_tokens=False)


@pytest.mark.parametrize(("insn", "message"), [
    (isa.Load(memory_type=isa.MemType.OUT, x_size=1),
     r"instruction #0 \(LOAD OUT .*\): LOAD into the OUT buffer is not an instruction"),
    (isa.Store(memory_type=isa.MemType.ACC, x_size=1),
     r"instruction #0 \(STORE ACC .*\): STORE must read the OUT buffer, not ACC"),
    (isa.Store(x_size=1, x_pad_0=1), r"STORE cannot pad: all four pad fields must be 0"),
    (isa.Alu(reset=True), r"instruction #0 \(ALU .*\): ALU instructions cannot set reset"),
    (isa.Gemm(uop_bgn=5, uop_end=2), r"uop_end 2 is before uop_bgn 5"),
    (isa.Gemm(uop_bgn=0, uop_end=257), r"uop_end 257 is outside the UOP buffer of 256 micro-ops"),
    (isa.Load(memory_type=isa.MemType.ACC, sram_base=250, y_size=2, x_size=4, x_stride=4),
     r"LOAD reaches ACC index 257, outside the ACC buffer of 256 elements"),
    (isa.Load(memory_type=isa.MemType.ACC_8BIT, sram_base=255, x_size=2),
     r"LOAD reaches ACC index 256, outside the ACC buffer of 256 elements"),
    (isa.Store(sram_base=255, x_size=2), r"STORE reaches OUT index 256, outside the OUT buffer of 256"),
    (isa.Load(memory_type=isa.MemType.ACC, dram_base=1 << 20, x_size=1),
     r"DRAM access up to byte 16777231 \(element 1048576 of 16 bytes\) is outside the \d+-byte DRAM"),
    (isa.Load(memory_type=isa.MemType.INP, x_size=1, pop_prev=True),
     r"^instruction #0: LOAD on the load module sets pop_prev, but no module comes before load$"),
    (isa.Store(x_size=1, push_next=True),
     r"^instruction #0: STORE on the store module sets push_next, but no module comes after store$"),
])
def test_malformed_instructions_raise_what_fsim_raises(insn, message):
    cfg = PRESETS["tiny"]
    program = _one(cfg, insn)
    with pytest.raises(SimulationError, match=message):
        TimingSimulator(cfg).run(program)
    with pytest.raises(SimulationError):  # fsim rejects the same program
        FunctionalSimulator(cfg).run(program, {"X": np.zeros((64, 1, 4), np.int32)})


def _patched_word(program, index: int, low_mask: int, value: int):
    insns = program.insns.copy()
    insns[index, 0] = (int(insns[index, 0]) & ~low_mask) | value
    return type(program)(program.fingerprint, insns, program.regions, program.constants,
                         program.dram_bytes, program.config_name)


def test_unknown_opcode_and_memory_type():
    cfg = PRESETS["tiny"]
    program = _one(cfg, isa.Load(memory_type=isa.MemType.ACC, x_size=1))
    with pytest.raises(SimulationError, match=r"^instruction #0: unknown opcode 7 in instruction word 0x"):
        TimingSimulator(cfg).run(_patched_word(program, 0, 0b111, 7))
    mem = isa.layouts(cfg)["mem"]["memory_type"]
    bad = _patched_word(program, 0, 0b111 << mem.offset, 7 << mem.offset)
    with pytest.raises(SimulationError, match=r"^instruction #0: Load has unknown memory_type 7 in"):
        TimingSimulator(cfg).run(bad)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("dram_latency_cycles", 0, "dram_latency_cycles must be at least 1, not 0"),
    ("dram_bytes_per_cycle", -2, "dram_bytes_per_cycle must be at least 1, not -2"),
    ("max_cycles", 0, "max_cycles must be at least 1, not 0"),
])
def test_bad_options(option, value, message):
    with pytest.raises(ValueError, match=message):
        TimingSimulator(PRESETS["tiny"], **{option: value})


def test_program_for_another_config_is_rejected():
    work = blocked_gemm(PRESETS["tiny"], GemmTiling(4, 4, 4, 2, 2, 2, 2))
    with pytest.raises(ValueError, match="program was built for config tiny"):
        TimingSimulator(PRESETS["rect"]).run(work.program)


# -- the build -------------------------------------------------------------------------------------


def test_build_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    first = build.library()
    assert first.exists() and first.is_relative_to(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert build.library() == first and first.stat().st_mtime_ns == mtime


def test_missing_compiler_is_reported(monkeypatch):
    build.compiler.cache_clear()
    monkeypatch.setenv("CXX", "")
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    try:
        with pytest.raises(build.TimingBuildError, match=r"no C\+\+ compiler found"):
            build.compiler()
    finally:
        build.compiler.cache_clear()


def test_compiler_failure_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path / "cache"))
    (tmp_path / "model.cpp").write_text("this is not C++\n")
    monkeypatch.setattr(build, "SOURCE_DIR", tmp_path)
    with pytest.raises(build.TimingBuildError, match="building the timing model failed with exit status"):
        build.library()


def test_model_and_decoder_must_agree(monkeypatch):
    from sim import timing

    monkeypatch.setattr(decode, "FIELDS", decode.FIELDS[:-1])
    monkeypatch.setattr(timing._Library, "_loaded", {})
    with pytest.raises(RuntimeError, match="model fields/params differ from sim/timing/decode.py"):
        TimingSimulator(PRESETS["tiny"])


# -- traces ----------------------------------------------------------------------------------------


def test_trace_agrees_with_the_counters(cfg, tmp_path):
    rp = random_program(cfg, 7)
    result, act = TimingSimulator(cfg).run_traced(rp.program)
    assert result.stats == TimingSimulator(cfg).run(rp.program).stats  # tracing changes nothing
    stats = result.stats
    assert act.cycles == stats.cycles
    for module in MODULE_TRACKS:
        assert act.busy_cycles(module) == getattr(stats, f"{module}_busy_cycles")
        spans = [(i.start, i.end) for i in act.tracks[module]]
        assert all(a < b for a, b in spans) and all(b <= c for (_, b), (c, _) in itertools.pairwise(spans))
    beats = act.busy_cycles("dram read")
    assert beats * cfg.bus_bytes >= stats.inp_load_bytes + stats.wgt_load_bytes
    for queue in QUEUES:
        assert act.tokens[queue][0] == (0, 0) and all(n >= 0 for _, n in act.tokens[queue])
    path = tmp_path / "t.json"
    act.write(path)
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
    assert names == ["load", "compute", "store", "gemm", "fetch dma", "inp dma", "wgt dma",
                     "uop dma", "acc dma", "dram read", "dram write"]
    per_dma = sum(act.busy_cycles(t) for t in DMA_TRACKS)
    assert per_dma == act.busy_cycles("dram read")  # every read beat belongs to one DMA
    assert all(e["dur"] > 0 for e in events if e["ph"] == "X")
    assert {e["name"] for e in events if e["ph"] == "C"} == {f"tokens {q}" for q in QUEUES}


def _fake_build(calls):
    def fake(cxx, tmp):
        calls.append(tmp)
        (tmp / build.LIBRARY_NAME).write_bytes(b"\x7fELF library bytes")

    return fake


@pytest.mark.parametrize("how", ["truncated", "empty", "foreign"])
def test_a_damaged_library_is_rebuilt(tmp_path, monkeypatch, how):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(build, "_build", _fake_build(calls))
    path = build.library()
    if how == "foreign":  # another build's library (same size), moved into this key
        path.write_bytes(b"\x7fELF other lib bytes")
    else:
        path.write_bytes(path.read_bytes()[:4] if how == "truncated" else b"")
    os.utime(path, ns=(1, 1))
    assert build.library() == path and len(calls) == 2
    assert path.read_bytes() == b"\x7fELF library bytes"


@pytest.mark.slow
def test_a_truncated_library_is_rebuilt_for_real(tmp_path, monkeypatch):
    """Before the manifest, a truncated libtiming.so was loaded (a crash in ctypes)."""
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    path = build.library()
    path.write_bytes(path.read_bytes()[:4096])
    assert build.library() == path and path.stat().st_size > 4096
    rp = random_program(PRESETS["tiny"], 1)
    assert TimingSimulator(PRESETS["tiny"]).run(rp.program).stats.cycles
