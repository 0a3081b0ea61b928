"""The micro-architecture's throughput claims, read from the hardware counters on `vta`."""

from __future__ import annotations

import numpy as np

from hw.config import PRESETS
from sim.rtl.backend import RtlSimulator
from sim.workloads import GemmTiling, blocked_gemm, long_load, resident_gemm

VTA = PRESETS["vta"]


def test_gemm_core_runs_one_micro_op_per_cycle():
    work = resident_gemm(VTA, m_tile=64, k_tile=4, n_tile=4, repeats=8)
    result = RtlSimulator(VTA).run(work.program, work.inputs)
    assert np.array_equal(result.outputs["C"], work.expected["C"])
    stats = result.stats
    assert stats.gemm_uops == 8 * 64 * 4 * 4
    assert stats.gemm_busy_cycles is not None
    assert stats.gemm_uops / stats.gemm_busy_cycles >= 0.95, stats


def test_long_weight_load_streams_at_bus_bandwidth():
    work = long_load(VTA, elems=512)  # 128 KiB, 16384 bus words, 64-cycle latency
    stats = RtlSimulator(VTA).run(work.program, work.inputs).stats
    words = stats.wgt_load_bytes / VTA.bus_bytes
    assert stats.load_busy_cycles is not None and stats.cycles is not None
    assert stats.cycles >= stats.load_busy_cycles >= words  # no faster than one word per cycle
    assert words / stats.load_busy_cycles >= 0.9, stats


def test_two_virtual_threads_keep_the_gemm_core_busy():
    # Per tile: 2048 GEMM micro-ops against 1536 bus words of loads; 64 tiles, K = 512 so the
    # reset GEMMs (1/32 of the work) and the first load and last store are amortized.
    work = blocked_gemm(VTA, GemmTiling(1024, 32, 4, 128, 4, 4, 2))
    result = RtlSimulator(VTA).run(work.program, work.inputs)
    assert np.array_equal(result.outputs["C"], work.expected["C"])
    stats = result.stats
    assert stats.cycles is not None
    assert stats.gemm_uops / stats.cycles >= 0.9, stats
