"""RTL vs fsim, bit for bit: seeded random programs under random DRAM models, per config."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hw.config import PRESETS, AcceleratorConfig
from sim.backend import SimulationError
from sim.conformance import run_suite
from sim.differential import first_difference
from sim.fsim import FunctionalSimulator
from sim.random_programs import random_program
from sim.rtl.backend import RtlSimulator

PROGRAMS = 200
# The three presets, and a stress config: batch 4, 256-bit bus with 4-beat bursts, one read in
# flight, token counters that saturate at 3 and 2-deep command queues.
STRESS = PRESETS["tiny"].with_params(
    name="stress", batch=4, block_in=4, block_out=8, inp_bytes=4096, wgt_bytes=8192,
    acc_bytes=8192, bus_bits=256, max_burst_beats=4, mem_inflight=1, token_counter_bits=2,
    cmd_queue_depth=2,
)
CONFIGS = [PRESETS["vta"], PRESETS["tiny"], PRESETS["rect"], STRESS]


@pytest.fixture(scope="module", params=CONFIGS, ids=[c.name for c in CONFIGS])
def cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    return request.param  # type: ignore[no-any-return]


def test_conformance_suite_passes_on_rtl(cfg):
    report = run_suite(RtlSimulator(cfg))
    assert report.failed == 0, [r for r in report.results if not r.passed]


def test_random_programs_match_fsim(cfg):
    failures = []
    for seed in range(PROGRAMS):
        rng = random.Random(seed)
        latency = rng.choice([1, 2, 7, 64, 150])
        rate = rng.choice([1, cfg.bus_bytes // 2, cfg.bus_bytes, 2 * cfg.bus_bytes])
        rp = random_program(cfg, seed)
        ref = FunctionalSimulator(cfg).run(rp.program, rp.inputs)
        dut = RtlSimulator(cfg, dram_latency_cycles=latency, dram_bytes_per_cycle=rate)
        diff = first_difference(rp.program, cfg, ref, dut.run(rp.program, rp.inputs))
        if diff:
            failures.append(f"seed {seed} (latency {latency}, {rate} B/cycle): {diff}")
    assert not failures, f"{len(failures)} of {PROGRAMS} differ:\n" + "\n".join(failures[:10])


def test_same_program_twice_is_identical(cfg):
    sim = RtlSimulator(cfg)
    rp = random_program(cfg, 12345, tasks=4)
    first, second = sim.run(rp.program, rp.inputs), sim.run(rp.program, rp.inputs)
    assert np.array_equal(first.dram, second.dram)
    assert first.stats == second.stats and first.stats.cycles


def test_deadlock_is_reported_by_the_watchdog():
    from sim.conformance import CASES

    cfg = PRESETS["tiny"]
    deadlock = next(c for c in CASES if c.name == "deadlock").build(cfg)
    sim = RtlSimulator(cfg, idle_limit=5000, validate=False)
    with pytest.raises(SimulationError, match=r"rtl: deadlock at cycle \d+: no instruction retired, "
                                               r"no micro-op ran and no bus beat moved for 5000 "
                                               r"cycles; progress: 0 load, 0 compute"):
        sim.run(deadlock.program, deadlock.inputs)


def test_bench_cosim_reports_speed_and_verifies_the_result():
    from codesign.bench.cosim import run

    result = run(PRESETS["tiny"], pyverilator_cycles=500, shape=(64, 64, 64)).to_json()
    assert result["verified"] is True and result["cycles"] > 0
    assert result["cycles_per_s"] > 0 and result["pyverilator_cycles_per_s"] > 0
    assert result["build_s"] > 0 and result["macs_per_cycle"] <= PRESETS["tiny"].macs_per_cycle


@pytest.mark.slow
def test_long_random_sweep_matches_fsim(cfg):
    """`make test-slow`: 2,000 more programs per config, longer ones, under random DRAM models."""
    failures = []
    for seed in range(10_000, 12_000):
        rng = random.Random(seed)
        rp = random_program(cfg, seed, tasks=rng.randint(1, 10))
        ref = FunctionalSimulator(cfg).run(rp.program, rp.inputs)
        dut = RtlSimulator(cfg, dram_latency_cycles=rng.randint(1, 200),
                           dram_bytes_per_cycle=rng.randint(1, 2 * cfg.bus_bytes))
        diff = first_difference(rp.program, cfg, ref, dut.run(rp.program, rp.inputs))
        if diff:
            failures.append(f"seed {seed}: {diff}")
    assert not failures, f"{len(failures)} differ:\n" + "\n".join(failures[:10])
