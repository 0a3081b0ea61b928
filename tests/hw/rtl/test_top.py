"""The whole Accelerator in amaranth.sim: the ISA conformance suite on `tiny`, with the
functional counters compared to fsim's, and the CONTRACT.md port list."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.back import verilog

from hw.config import PRESETS
from hw.rtl.top import COUNTERS, Accelerator
from sim import conformance
from sim.backend import SimulationError, Stats
from sim.fsim import FunctionalSimulator
from tests.hw.rtl.rtlsim import AmaranthBackend

CFG = PRESETS["tiny"]
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
CONTRACT_PORTS = {
    "start", "insn_addr", "insn_count", "done",
    "mem_ar_valid", "mem_ar_ready", "mem_ar_addr", "mem_ar_len",
    "mem_r_valid", "mem_r_ready", "mem_r_data", "mem_r_last",
    "mem_aw_valid", "mem_aw_ready", "mem_aw_addr", "mem_aw_len",
    "mem_w_valid", "mem_w_ready", "mem_w_data", "mem_w_strb", "mem_w_last",
}


def test_ports_follow_the_contract() -> None:
    dut = Accelerator(CFG)
    names = set(dut.signature.members)
    counters = {f"cnt_{f}" for f in Stats.__dataclass_fields__}
    assert names == CONTRACT_PORTS | counters
    assert set(COUNTERS) == set(Stats.__dataclass_fields__)
    assert len(dut.mem_r_data) == CFG.bus_bits and len(dut.mem_w_strb) == CFG.bus_bytes
    assert all(len(getattr(dut, c)) == 64 for c in counters)


def test_verilog_converts() -> None:
    text = verilog.convert(Accelerator(CFG), name="accel")
    assert "module accel(" in text and "mem_w_strb" in text


def test_conformance_suite() -> None:
    """Every case once, with DRAM back-pressure; outputs as the reference, counters as fsim."""
    backend = AmaranthBackend(CFG, latency=5, p_ready=0.7, seed=5)
    fsim = FunctionalSimulator(CFG)
    failures = []
    for case in conformance.CASES:
        built = case.build(CFG)
        if built.error:
            with pytest.raises(SimulationError, match=built.error):
                backend.run(built.program, built.inputs)
            continue
        result = backend.run(built.program, built.inputs)
        for name, want in built.expected.items():
            if not np.array_equal(result.outputs[name], want):
                failures.append(f"{case.name}: output {name} differs")
        got = result.stats.functional()
        want_stats = fsim.run(built.program, built.inputs).stats.functional()
        if got != want_stats:
            diff = {k: (got[k], want_stats[k]) for k in got if got[k] != want_stats[k]}
            failures.append(f"{case.name}: counters (rtl, fsim) {diff}")
    assert not failures, "\n".join(failures)


def test_two_virtual_threads_overlap_load_and_compute() -> None:
    """Loads of the next tile run while the GEMM core works on the current one."""
    from sim.workloads import GemmTiling, blocked_gemm

    work = blocked_gemm(CFG, GemmTiling(4, 16, 4, 4, 4, 4, 2), seed=3)
    result = AmaranthBackend(CFG, latency=CFG.dram_latency_cycles).run(work.program, work.inputs)
    for name, want in work.expected.items():
        np.testing.assert_array_equal(result.outputs[name], want)
    s = result.stats
    assert s.cycles is not None and s.load_busy_cycles is not None
    assert s.gemm_busy_cycles is not None
    # overlap: the run is shorter than load and GEMM time back to back
    assert s.cycles < s.load_busy_cycles + s.gemm_busy_cycles
