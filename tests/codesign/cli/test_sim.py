"""`codesign sim` with the timing backend and activity traces."""

from __future__ import annotations

import json

import pytest

from codesign.cli import main
from hw.config import PRESETS
from sim.workloads import GemmTiling, blocked_gemm
from tests.sim.rtl.stub_accel import needs_verilator


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def program(tmp_path):
    work = blocked_gemm(PRESETS["tiny"], GemmTiling(4, 4, 4, 2, 2, 2, 2))
    path = tmp_path / "p.npz"
    work.program.save(path)
    return path


def test_selftest_on_timing(capsys):
    code, out, _ = run(capsys, "sim", "selftest", "--backend", "timing", "--config", "tiny", "--json")
    report = json.loads(out)
    assert code == 0 and report["backend"] == "timing" and report["failed"] == 0
    assert report["passed"] == len(report["results"]) > 20


def test_run_on_timing_needs_no_inputs_and_writes_a_trace(capsys, program, tmp_path):
    trace = tmp_path / "t.json"
    code, out, _ = run(capsys, "sim", "run", str(program), "--backend", "timing", "--trace",
                       str(trace), "--json")
    stats = json.loads(out)["stats"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert code == 0 and stats["cycles"] > 0 and stats["gemm_uops"] == 64
    busy = sum(e["dur"] for e in events if e["ph"] == "X" and e["tid"] == 2)  # compute
    assert round(busy * 1000) == stats["compute_busy_cycles"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--backend", "fsim", "--trace", "t.json"],
     "--trace needs --backend timing or rtl (fsim has no notion of time)"),
    (["--backend", "rtl", "--trace", "t.json", "--vcd", "w.vcd", "--random-inputs", "1"],
     "--vcd and --trace are separate runs: give one of them"),
])
def test_bad_trace_requests(capsys, program, extra, message):
    code, _, err = run(capsys, "sim", "run", str(program), *extra)
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.rtl
@needs_verilator[1]
def test_rtl_trace_equals_the_timing_trace(capsys, program, tmp_path):
    traces = {}
    for backend in ("rtl", "timing"):
        path = tmp_path / f"{backend}.json"
        code, _, _ = run(capsys, "sim", "run", str(program), "--backend", backend,
                         "--random-inputs", "3", "--trace", str(path))
        assert code == 0
        traces[backend] = [e for e in json.loads(path.read_text())["traceEvents"]
                           if e["ph"] == "C" or (e["ph"] == "X" and e["tid"] != 4)]
    assert traces["rtl"] == traces["timing"] and len(traces["rtl"]) > 20


def test_timeline_draws_the_modules_activity(capsys, program, tmp_path):
    trace, figure = tmp_path / "t.json", tmp_path / "t.png"
    code, _, _ = run(capsys, "sim", "run", str(program), "--backend", "timing", "--trace", str(trace),
                     "--timeline", str(figure))
    assert code == 0 and trace.exists()  # one traced run gives both
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("extra", "message"), [
    (["--timeline", "t.png"], "--timeline needs --backend timing or rtl (fsim has no notion of time)"),
    (["--backend", "timing", "--timeline", "t.json"],
     "--timeline t.json: a figure file ends in .png, .svg, .pdf"),
    (["--backend", "rtl", "--timeline", "t.png", "--vcd", "w.vcd", "--random-inputs", "1"],
     "--vcd and --timeline are separate runs: give one of them"),
])
def test_bad_timeline_requests(capsys, program, extra, message):
    code, _, err = run(capsys, "sim", "run", str(program), *extra)
    assert code == 2 and message in err and err.count("\n") == 1
