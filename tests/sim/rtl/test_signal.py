"""Signal-level simulation (pyverilator) on the stub design, against the C++ harness."""

from __future__ import annotations

import numpy as np
import pytest

from hw.program import ProgramBuilder
from sim.backend import SimulationError
from sim.rtl.backend import RtlSimulator
from sim.rtl.signal import SignalSim, run_with_vcd
from tests.sim.rtl.stub_accel import WIDE, copy_program, expected_copy, image, needs_verilator

pytestmark = needs_verilator
SRC, DST = 4096, 8192


@pytest.fixture(scope="module")
def signal(stub_design):
    return SignalSim(WIDE, design=stub_design)


@pytest.mark.parametrize(("latency", "bandwidth"), [(1, 64), (7, 8), (30, 200)])
def test_same_cycles_and_bytes_as_the_harness(stub_design, signal, latency, bandwidth, monkeypatch):
    dram, count = image(WIDE, copy_program(WIDE, SRC, DST, rows=5, beats=3, stride=4))
    slow = dram.copy()
    fast = RtlSimulator(WIDE, design=stub_design, dram_latency_cycles=latency,
                        dram_bytes_per_cycle=bandwidth).run_image(dram, 0, count)
    # the simulator is shared by the module's tests: monkeypatch puts its DRAM model back after
    monkeypatch.setattr(signal, "dram_latency_cycles", latency)
    monkeypatch.setattr(signal, "dram_bytes_per_cycle", bandwidth)
    assert signal.run_image(slow, 0, count) == fast
    np.testing.assert_array_equal(slow, dram)
    np.testing.assert_array_equal(dram, expected_copy(WIDE, slow, SRC, DST, rows=5, beats=3,
                                                      stride=4))


def test_vcd_of_a_run(stub_design, tmp_path):
    builder = ProgramBuilder(WIDE)
    builder.finish()
    vcd = tmp_path / "run.vcd"
    result = run_with_vcd(WIDE, builder.build(), {}, vcd, design=stub_design)
    text = vcd.read_text()
    assert result.stats.compute_insns == 1
    assert "$var wire 512" in text and " mem_r_data " in text and " done " in text
    assert text.count("\n#") >= 2 * (result.stats.cycles or 0)  # two samples per cycle


def test_step_peek_poke(signal):
    signal.reset()
    assert signal.peek("done") == 0
    signal.poke("insn_addr", 0x40)
    signal.poke("start", 1)
    signal.step()
    signal.poke("start", 0)
    signal.poke("mem_ar_ready", 0)
    signal.step(3)
    assert signal.peek("mem_ar_valid") == 1
    assert signal.peek("mem_ar_addr") == 0x40
    signal.poke("mem_r_data", (1 << 511) | 5)  # wide ports round-trip through 32-bit words
    signal.eval()
    assert signal.peek("mem_r_data") == (1 << 511) | 5


def test_port_errors(signal, tmp_path):
    with pytest.raises(KeyError, match="accel has no port 'nope'; ports: clk, cnt_acc_load_bytes"):
        signal.peek("nope")
    with pytest.raises(KeyError, match="accel has no input port 'done'"):
        signal.poke("done", 1)
    signal.open_vcd(tmp_path / "a.vcd")
    try:
        with pytest.raises(ValueError, match=r"a VCD trace is already open; close_vcd\(\) it"):
            signal.open_vcd(tmp_path / "b.vcd")
    finally:
        signal.close_vcd()


@pytest.mark.parametrize(("fault", "message"), [
    (0, r"rtl: read of 64 bytes at address 0x4000 is outside the 16384-byte DRAM image"),
    (1, r"rtl: memory protocol violation at cycle \d+: read of 64 bytes at address 0x4001 is not "
        r"aligned to the 64-byte bus"),
    (2, r"rtl: memory protocol violation at cycle \d+: w_last wrong on beat 0 of the write of "
        r"64 bytes at address 0x2000"),
    (4, r"rtl: memory protocol violation at cycle \d+: write data beat without a preceding "
        r"write address \(AW\)"),
])
def test_python_dram_model_reports_as_the_harness(signal, stub_design, fault, message):
    src = 1 << 14 if fault == 0 else SRC + (1 << 14) - SRC if fault == 1 else SRC
    dram, count = image(WIDE, copy_program(WIDE, src, DST, rows=1, beats=1, sram_base=fault))
    signal.dram_latency_cycles, signal.dram_bytes_per_cycle = 8, 8
    with pytest.raises(SimulationError, match=message):
        signal.run_image(dram, 0, count)
    with pytest.raises(SimulationError, match=message):
        RtlSimulator(WIDE, design=stub_design).run_image(dram, 0, count)


@pytest.mark.parametrize(("src", "dst", "request_"), [
    (SRC - 64, DST, r"read of 128 bytes at address 0xfc0"),
    (SRC, DST - 64, r"write of 128 bytes at address 0x1fc0"),
])
def test_python_dram_model_refuses_a_burst_across_4_kib_as_the_harness(signal, stub_design, src, dst,
                                                                       request_):
    dram, count = image(WIDE, copy_program(WIDE, src, dst, rows=1, beats=2))
    message = rf"rtl: memory protocol violation at cycle \d+: {request_} crosses a 4096-byte boundary"
    with pytest.raises(SimulationError, match=message):
        signal.run_image(dram, 0, count)
    with pytest.raises(SimulationError, match=message):
        RtlSimulator(WIDE, design=stub_design).run_image(dram, 0, count)


def test_cycle_limit(signal):
    dram, count = image(WIDE, copy_program(WIDE, SRC, DST))
    with pytest.raises(
        SimulationError,
        match=r"rtl: no FINISH within max_cycles=20 \(ran 20 "
        r"cycles\).*progress: 1 load, 0 compute, 0 store instructions done, 2 read "
        r"and 0 write beats, 3 reads and 0 writes pending",
    ):
        signal.run_image(dram, 0, count, max_cycles=20)


def test_cli_vcd_run_of_the_real_design_matches_the_harness(tmp_path, capsys):
    """`codesign sim run --backend rtl --vcd` (pyverilator) and the C++ harness agree exactly."""
    import json

    from codesign.cli import main
    from hw.config import PRESETS
    from sim.workloads import GemmTiling, blocked_gemm

    path, vcd = tmp_path / "p.npz", tmp_path / "run.vcd"
    blocked_gemm(PRESETS["tiny"], GemmTiling(4, 4, 4, 4, 2, 2, 2)).program.save(path)
    runs = []
    for extra in ([], ["--vcd", str(vcd)]):
        code = main(["sim", "run", str(path), "--backend", "rtl", "--random-inputs", "1",
                     "--json", *extra])
        assert code == 0
        runs.append(json.loads(capsys.readouterr().out)["stats"])
    assert runs[0] == runs[1] and runs[0]["gemm_uops"] == 64
    assert vcd.read_text().startswith("$version") and "mem_r_data" in vcd.read_text()
