"""The C++ harness and its DRAM model, on the stub design (tests/sim/rtl/stub_accel.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hw import isa
from hw.program import ProgramBuilder, ProgramError
from sim.backend import SimulationError
from sim.rtl import build
from sim.rtl.backend import RtlSimulator
from sim.rtl.ports import PortMismatchError, check_ports
from tests.sim.rtl.stub_accel import NARROW, WIDE, copy_program, expected_copy, image, needs_verilator

pytestmark = needs_verilator
SRC, DST = 4096, 8192


@pytest.fixture(scope="session")
def sim(stub_cfg, stub_design):
    return RtlSimulator(stub_cfg, design=stub_design)


def test_copy_moves_bytes_and_counts(sim):
    cfg = sim.config
    dram, count = image(cfg, copy_program(cfg, SRC, DST))
    expected = expected_copy(cfg, dram, SRC, DST)
    stats = sim.run_image(dram, 0, count)
    np.testing.assert_array_equal(dram, expected)
    assert (stats.load_insns, stats.store_insns, stats.compute_insns) == (1, 1, 1)
    assert stats.inp_load_bytes == stats.out_store_bytes == 3 * 4 * cfg.bus_bytes
    assert stats.cycles is not None and stats.cycles > cfg.dram_latency_cycles


def test_same_run_twice_is_identical(sim):
    cfg = sim.config
    first, count = image(cfg, copy_program(cfg, SRC, DST))
    second = first.copy()
    assert sim.run_image(first, 0, count) == sim.run_image(second, 0, count)
    np.testing.assert_array_equal(first, second)


def test_dram_model_is_a_runtime_parameter(stub_cfg, stub_design, sim):
    dram, count = image(stub_cfg, copy_program(stub_cfg, SRC, DST))

    def cycles(**dram_model):
        other = RtlSimulator(stub_cfg, design=stub_design, **dram_model)
        assert other.library_path == sim.library_path  # no rebuild
        return other.run_image(dram.copy(), 0, count).cycles

    fast = cycles(dram_latency_cycles=1, dram_bytes_per_cycle=stub_cfg.bus_bytes)
    assert cycles(dram_latency_cycles=101, dram_bytes_per_cycle=stub_cfg.bus_bytes) > fast + 100
    assert cycles(dram_latency_cycles=1, dram_bytes_per_cycle=1) > fast + 20 * stub_cfg.bus_bytes


def test_configs_coexist_in_one_process(stub_design):
    sims = [RtlSimulator(cfg, design=stub_design) for cfg in (NARROW, WIDE, NARROW)]
    for s in sims:
        dram, count = image(s.config, copy_program(s.config, SRC, DST))
        expected = expected_copy(s.config, dram, SRC, DST)
        s.run_image(dram, 0, count)
        np.testing.assert_array_equal(dram, expected)


def test_read_outside_the_image_is_an_error(sim):
    cfg = sim.config
    dram, count = image(cfg, copy_program(cfg, len_ := 1 << 14, DST, rows=1, beats=2))
    with pytest.raises(
        SimulationError,
        match=rf"rtl: read of {2 * cfg.bus_bytes} bytes at "
        rf"address {len_:#x} is outside the 16384-byte DRAM image \(cycle \d+\)",
    ):
        sim.run_image(dram, 0, count)


def test_write_outside_the_image_is_an_error(sim):
    cfg = sim.config
    dst = (1 << 14) - cfg.bus_bytes
    dram, count = image(cfg, copy_program(cfg, SRC, dst, rows=1, beats=2))
    with pytest.raises(
        SimulationError,
        match=rf"rtl: write of {2 * cfg.bus_bytes} bytes at "
        rf"address {dst:#x} is outside the 16384-byte DRAM image",
    ):
        sim.run_image(dram, 0, count)


@pytest.mark.parametrize(("fault", "message"), [
    (1, r"read of \d+ bytes at address 0x1001 is not aligned to the \d+-byte bus"),
    (2, r"w_last wrong on beat 3 of the write of \d+ bytes at address 0x2000"),
    (4, r"write data beat without a preceding write address \(AW\)"),
])
def test_protocol_violations_are_errors(sim, fault, message):
    dram, count = image(sim.config, copy_program(sim.config, SRC, DST, sram_base=fault))
    with pytest.raises(SimulationError, match=r"rtl: memory protocol violation at cycle \d+: "
                       + message):
        sim.run_image(dram, 0, count)


@pytest.mark.parametrize("channel", ["read", "write"])
def test_burst_across_a_4_kib_boundary_is_an_error(sim, channel):
    cfg = sim.config
    src, dst = (SRC - cfg.bus_bytes, DST) if channel == "read" else (SRC, DST - cfg.bus_bytes)
    dram, count = image(cfg, copy_program(cfg, src, dst, rows=1, beats=2))
    at = src if channel == "read" else dst
    with pytest.raises(SimulationError, match=rf"rtl: memory protocol violation at cycle \d+: "
                       rf"{channel} of {2 * cfg.bus_bytes} bytes at address {at:#x} crosses a "
                       rf"4096-byte boundary"):
        sim.run_image(dram, 0, count)


def test_bursts_up_to_a_4_kib_boundary_pass(sim):
    cfg = sim.config
    src, dst = SRC - 2 * cfg.bus_bytes, DST - 2 * cfg.bus_bytes  # end exactly at the boundary
    dram, count = image(cfg, copy_program(cfg, src, dst, rows=1, beats=2))
    expected = expected_copy(cfg, dram, src, dst, rows=1, beats=2)
    sim.run_image(dram, 0, count)
    np.testing.assert_array_equal(dram, expected)


def test_burst_longer_than_the_config_allows_is_an_error(sim):
    cfg = sim.config
    beats = cfg.max_burst_beats + 1
    dram, count = image(cfg, copy_program(cfg, SRC, DST, rows=1, beats=beats))
    with pytest.raises(SimulationError, match=rf"has {beats} beats, more than max_burst_beats="
                       rf"{cfg.max_burst_beats}"):
        sim.run_image(dram, 0, count)


def test_deadlock_hits_the_cycle_limit_with_progress(stub_cfg, stub_design):
    sim = RtlSimulator(stub_cfg, design=stub_design, max_cycles=5000)
    insns = [*copy_program(stub_cfg, SRC, DST)[:2], isa.Gemm(), isa.Finish()]
    dram, count = image(stub_cfg, insns)
    with pytest.raises(SimulationError, match=r"rtl: no FINISH within max_cycles=5000 \(ran 5000 "
                       r"cycles\): a deadlock, or raise the limit; progress: 1 load, 0 compute, "
                       r"1 store instructions done, \d+ read and 12 write beats, 0 reads and 0 "
                       r"writes pending"):
        sim.run_image(dram, 0, count)


def test_program_for_another_config_is_rejected(sim):
    other = WIDE if sim.config is NARROW else NARROW
    builder = ProgramBuilder(other)
    builder.finish()
    with pytest.raises(ProgramError, match="program was built for config"):
        sim.run(builder.build(), {})


def test_program_runs_through_the_backend_protocol(sim):
    builder = ProgramBuilder(sim.config)
    builder.finish()
    result = sim.run(builder.build(), {})
    assert result.outputs == {}
    assert result.stats.compute_insns == 1
    assert result.dram.dtype == np.uint8


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_cycles must be at least 1, not 0"):
        RtlSimulator(NARROW, max_cycles=0)
    with pytest.raises(TypeError, match="dram_latency_cycles must be an int, not float 1.5"):
        RtlSimulator(NARROW, dram_latency_cycles=1.5)  # type: ignore[arg-type]


def test_dram_must_be_a_writeable_byte_buffer(sim):
    with pytest.raises(TypeError, match="dram must be a 1-D contiguous uint8 array"):
        sim.run_image(np.zeros(16, np.uint32), 0, 1)
    frozen = np.zeros(16, np.uint8)
    frozen.setflags(write=False)
    with pytest.raises(TypeError, match="dram must be writeable"):
        sim.run_image(frozen, 0, 1)


def test_second_process_reuses_the_build(sim, stub_design):
    library = sim.library_path
    stamp = library.stat().st_mtime_ns
    code = (
        "import sys\nfrom tests.sim.rtl.stub_accel import needs_verilator, StubAccel\n"
        "from sim.rtl.backend import RtlSimulator\n"
        "from hw.config import AcceleratorConfig\n"
        "cfg = AcceleratorConfig.from_dict(eval(sys.argv[1]))\n"
        "print(RtlSimulator(cfg, design=StubAccel).library_path)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, repr(sim.config.to_dict())],
                            capture_output=True, text=True, check=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.stdout.strip() == str(library)
    assert library.stat().st_mtime_ns == stamp


def test_ports_are_checked_against_the_contract(stub_design):
    from hw.verilog import verilog_for

    text = verilog_for(NARROW, stub_design).read_text()
    with pytest.raises(PortMismatchError, match=r"module accel for config tiny512 does not match "
                       r"the port list of hw/rtl/CONTRACT.md: mem_r_data is in 64, expected in "
                       r"512; mem_w_data is out 64, expected out 512; mem_w_strb is out 8, "
                       r"expected out 64"):
        check_ports(text, WIDE)
    with pytest.raises(PortMismatchError, match=r"missing done \(out 1\)"):
        check_ports(text.replace("output done;", "output dne;"), NARROW)


def test_missing_verilator_is_reported(monkeypatch, tmp_path, stub_design):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    build.verilator_version.cache_clear()
    try:
        with pytest.raises(build.BuildError, match=r"verilator not found on PATH; install it with "
                           r"`apt-get install -y verilator`"):
            build.library_for(NARROW, stub_design)
    finally:
        build.verilator_version.cache_clear()


def test_failed_build_is_reported(monkeypatch, tmp_path, stub_design):
    monkeypatch.setattr(build, "VERILATOR_FLAGS", [*build.VERILATOR_FLAGS, "--no-such-flag"])
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path / "cache"))
    with pytest.raises(build.BuildError, match=r"Verilator build of config tiny \([0-9a-f]{16}\) "
                       r"failed with exit status \d+:\n.*no-such-flag"):
        build.library_for(NARROW, stub_design)
    assert not list((tmp_path / "cache" / "rtl").glob("[0-9a-f]*"))  # nothing half-built
