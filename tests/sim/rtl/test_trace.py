"""The rtl backend's activity trace (harness.cpp records it only when asked)."""

from __future__ import annotations

import numpy as np
import pytest

from hw.config import PRESETS
from sim.random_programs import random_program
from sim.rtl import trace
from sim.rtl.backend import RtlSimulator
from sim.timing import TimingSimulator
from sim.trace import MODULE_TRACKS, QUEUES, TRACKS
from tests.sim.rtl.stub_accel import needs_verilator

pytestmark = needs_verilator


@pytest.fixture(scope="module")
def sim():
    return RtlSimulator(PRESETS["tiny"], dram_latency_cycles=5)


def test_trace_agrees_with_the_hardware_counters(sim):
    rp = random_program(sim.config, 3)
    result, act = sim.run_traced(rp.program, rp.inputs)
    plain = sim.run(rp.program, rp.inputs)
    assert plain.stats == result.stats  # tracing does not change the run
    assert sim._lib.lib.sim_trace_length(sim._handle, 0) == 0  # and is off again afterwards
    for module in MODULE_TRACKS:
        assert act.busy_cycles(module) == getattr(result.stats, f"{module}_busy_cycles")
    beats = act.busy_cycles("dram write") * sim.config.bus_bytes
    assert beats >= result.stats.out_store_bytes
    assert all(act.tokens[q][0] == (0, 0) for q in QUEUES)


def test_rtl_and_timing_traces_match(sim):
    cfg = sim.config
    rp = random_program(cfg, 11)
    _, rtl = sim.run_traced(rp.program, rp.inputs)
    _, timing = TimingSimulator(cfg, dram_latency_cycles=5).run_traced(rp.program)
    assert rtl.cycles == timing.cycles
    for track in TRACKS:
        if track != "gemm":  # (labelled by the last compute start on rtl, by GEMM on timing)
            assert rtl.tracks[track] == timing.tracks[track], track
    for queue in QUEUES:
        assert rtl.tokens[queue] == timing.tokens[queue], queue


def test_expand_reads_the_run_length_encoding():
    # cycles 0-1 (harness) precede the counted ones; bit 0 = load busy, bit 13 = read beat
    rle = np.array([0, 0, 3, 1, 5, 1 | 1 << 13, 6, 0], dtype=np.uint64)
    bits = trace.expand(rle, 6)
    assert bits["load_busy"].tolist() == [False, True, True, True, False, False]
    assert bits["r"].tolist() == [False, False, False, True, False, False]
