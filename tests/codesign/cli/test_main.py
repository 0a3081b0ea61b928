import json
import subprocess
import sys

import numpy as np
import pytest

from codesign.cli import main
from hw.config import PRESETS
from sim import conformance
from sim.conformance import CaseResult, SuiteReport
from sim.workloads import GemmTiling, blocked_gemm


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_config_show_json_has_every_parameter_and_derived_value(capsys):
    code, out, _ = run(capsys, "config", "show", "vta", "--json")
    info = json.loads(out)
    assert code == 0
    for key in ("batch", "block_in", "block_out", "inp_depth", "wgt_depth", "acc_depth",
                "uop_depth", "macs_per_cycle", "bus_bits", "fingerprint"):
        assert key in info
    assert info["macs_per_cycle"] == 256 and info["fingerprint"] == PRESETS["vta"].fingerprint()


def test_config_show_text_and_overrides(capsys, tmp_path):
    code, out, _ = run(capsys, "config", "show", "tiny", "--set", "block_out=8")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert code == 0 and rows["block_out"] == ["8"] and rows["macs_per_cycle"] == ["32", "(derived)"]
    path = tmp_path / "c.json"
    PRESETS["rect"].save(path)
    code, out, _ = run(capsys, "config", "show", str(path), "--json")
    assert json.loads(out)["batch"] == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["config", "show", "vta", "--set", "batch=3"], "batch must be a power of two, not 3"),
    (["config", "show", "nope"], "'nope' is neither a preset"),
    (["config", "show", "--set", "x=1"], "unknown parameter 'x'"),
    (["isa", "dump", "missing.npz"], "missing.npz: no such program file"),
    (["sim", "selftest", "--config", "vta", "--set", "bus_bits=8"], "bus_bits must be in"),
])
def test_bad_input_is_one_line_and_exit_status_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_isa_dump_shows_running_token_occupancy(capsys, tmp_path):
    work = blocked_gemm(PRESETS["tiny"], GemmTiling(4, 4, 4, 4, 2, 2, 2))
    path = tmp_path / "p.npz"
    work.program.save(path)
    code, out, _ = run(capsys, "isa", "dump", str(path))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 + len(work.program.insns)
    assert lines[1].split()[:6] == ["#", "module", "l2c", "c2l", "c2s", "s2c"]
    first_inp = next(line for line in lines if "LOAD INP" in line)
    assert first_inp.split()[1:6] == ["load", "1", "0", "0", "0"]  # pushed one l2c token
    assert lines[-1].split()[1:6] == ["compute", "0", "0", "0", "0"]  # FINISH: all drained
    assert "FINISH  [pop_next]" in lines[-1]


def test_isa_dump_needs_a_config_for_custom_programs(capsys, tmp_path):
    cfg = PRESETS["tiny"].with_params(name="mine", block_out=8)
    work = blocked_gemm(cfg, GemmTiling(4, 4, 2, 4, 2, 2, 1))
    path = tmp_path / "p.npz"
    work.program.save(path)
    code, _, err = run(capsys, "isa", "dump", str(path))
    assert code == 2 and "built for config 'mine', which is not a preset; pass --config" in err
    code, _, err = run(capsys, "isa", "dump", str(path), "--config", "tiny")
    assert code == 2 and "not for tiny" in err
    code, out, _ = run(capsys, "isa", "dump", str(path), "--config", "tiny", "--set", "block_out=8")
    assert code == 0 and "GEMM" in out


def test_selftest_json(capsys):
    code, out, _ = run(capsys, "sim", "selftest", "--backend", "fsim", "--config", "rect", "--json")
    report = json.loads(out)
    assert code == 0 and report["backend"] == "fsim" and report["config"] == "rect"
    assert report["failed"] == 0 and report["passed"] == len(report["results"]) >= 25
    assert {"name", "passed"} <= set(report["results"][0])


def test_selftest_exit_status_is_nonzero_on_failure(capsys, monkeypatch):
    failing = SuiteReport("fsim", "tiny", [CaseResult("a", True), CaseResult("b", False, "boom")])
    monkeypatch.setattr(conformance, "run_suite", lambda backend: failing)
    code, out, _ = run(capsys, "sim", "selftest", "--config", "tiny")
    assert code == 1 and "FAIL  b  boom" in out and "1 passed, 1 failed" in out


def test_bench_fsim_prints_json(capsys):
    code, out, _ = run(capsys, "bench", "fsim", "--json", "--repeats", "1")
    result = json.loads(out)
    assert code == 0 and result["macs"] >= 100_000_000 and result["verified"] is True
    assert result["gmac_per_s"] > 0 and result["seconds"] > 0


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "codesign", "config", "show", "tiny", "--json"],
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["name"] == "tiny"


def test_sim_run_with_inputs_and_outputs(capsys, tmp_path):
    work = blocked_gemm(PRESETS["tiny"], GemmTiling(4, 4, 4, 4, 2, 2, 2), seed=4)
    program, inputs, outputs = tmp_path / "p.npz", tmp_path / "in.npz", tmp_path / "out.npz"
    work.program.save(program)
    np.savez(inputs, **work.inputs)
    code, out, _ = run(capsys, "sim", "run", str(program), "--inputs", str(inputs),
                       "--outputs", str(outputs), "--json")
    assert code == 0 and json.loads(out)["stats"]["gemm_uops"] == 64
    with np.load(outputs) as data:
        assert np.array_equal(data["C"], work.expected["C"])
    code, out, _ = run(capsys, "sim", "run", str(program), "--random-inputs", "3")
    assert code == 0 and "gemm_uops: 64" in out


@pytest.mark.parametrize(("extra", "message"), [
    ([], "the program has input regions: pass --inputs or --random-inputs"),
    (["--inputs", "nope.npz"], "nope.npz: no such inputs file"),
    (["--random-inputs", "1", "--vcd", "x.vcd"], "--vcd needs --backend rtl"),
])
def test_sim_run_errors(capsys, tmp_path, extra, message):
    path = tmp_path / "p.npz"
    blocked_gemm(PRESETS["tiny"], GemmTiling(4, 4, 4, 4, 2, 2, 1)).program.save(path)
    code, _, err = run(capsys, "sim", "run", str(path), *extra)
    assert code == 2 and message in err


def test_op_conv2d_json_is_correct_and_complete(capsys):
    from codesign.cli import main

    assert main(["op", "conv2d", "--in", "1,20,6,6", "--out-channels", "12", "--kernel", "3",
                 "--pad", "1", "--config", "tiny", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("correct", "cycles", "gemm_uops", "utilization", "instructions", "dram_bytes_read",
                "compile_s", "schedule"):
        assert key in out
    assert out["correct"] is True and out["cycles"] is None and out["utilization"] is None
    assert out["gemm_uops"] == 3 * 5 * 36 * 9  # channel blocks of 4: 20 -> 5, 12 -> 3


def test_op_schedule_file_round_trip(tmp_path, capsys):
    from codesign.cli import main

    path = tmp_path / "s.json"
    base = ["op", "dense", "--m", "2", "--k", "40", "--n", "24", "--config", "tiny", "--json"]
    assert main([*base, "--vthreads", "2", "--save-schedule", str(path)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([*base, "--schedule", str(path)]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["correct"] and second["instructions"] == first["instructions"]
    assert second["schedule"]["records"] == first["schedule"]["records"]


@pytest.mark.parametrize("args,message", [
    (["--vthreads", "zero"], "--vthreads must be auto or a positive integer"),
    (["--schedule", "/nonexistent.json"], "no such schedule file"),
])
def test_op_bad_arguments(args, message, capsys):
    from codesign.cli import main

    assert main(["op", "dense", "--m", "1", "--k", "16", "--n", "16", "--config", "tiny", *args]) == 2
    assert message in capsys.readouterr().err


def test_op_bad_conv_shape(capsys):
    from codesign.cli import main

    assert main(["op", "conv2d", "--in", "1,2,3", "--out-channels", "4"]) == 2
    assert "--in '1,2,3' must be four integers N,C,H,W" in capsys.readouterr().err


def test_op_add_json(capsys):
    from codesign.cli import main

    assert main(["op", "add", "--shape", "1,8,4,4", "--low", "0", "--config", "tiny", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["correct"] is True and out["op"] == "add" and out["stats"]["acc_load_bytes"] == 2 * 2 * 16 * 4


def _failing_selftest(monkeypatch, exc):
    def fail(backend):
        raise exc

    monkeypatch.setattr(conformance, "run_suite", fail)


def test_a_user_error_is_one_line_with_status_2(capsys, monkeypatch):
    from hw.errors import InputError

    _failing_selftest(monkeypatch, InputError("the input is wrong"))
    code, _, err = run(capsys, "sim", "selftest", "--config", "tiny")
    assert code == 2 and err == "codesign sim: error: the input is wrong\n"


def test_a_missing_file_is_a_user_error(capsys, tmp_path):
    code, _, err = run(capsys, "run", str(tmp_path / "absent.onnx"), "--config", "tiny")
    assert code == 2 and err.count("\n") == 1 and "absent.onnx" in err


@pytest.mark.parametrize("exc", [ValueError("an internal invariant"), KeyError("k"), OSError("disk")])
def test_a_bug_shows_its_traceback(capsys, monkeypatch, exc):
    # a plain ValueError or OSError is not one of the workbench's errors: it is a bug, not bad input
    _failing_selftest(monkeypatch, exc)
    with pytest.raises(type(exc)):
        main(["sim", "selftest", "--config", "tiny"])


def test_debug_shows_the_traceback_of_a_user_error_too(monkeypatch):
    from compiler.errors import ScheduleError

    _failing_selftest(monkeypatch, ScheduleError("no such tile"))
    with pytest.raises(ScheduleError, match="no such tile"):
        main(["--debug", "sim", "selftest", "--config", "tiny"])


def test_every_error_class_of_the_workbench_is_a_user_error():
    from codesign.cli.main import USER_ERRORS
    from codesign.zoo.errors import ZooError
    from compiler.errors import GraphError, ModelImportError, ScheduleError, TensorExprError
    from compiler.quant.errors import QuantizationError
    from compiler.runtime.serialize import ModelFileError
    from hw.config import ConfigError
    from hw.isa import EncodingError
    from hw.program import ProgramError
    from sim.backend import SimulationError

    for cls in (ConfigError, EncodingError, ProgramError, SimulationError, ScheduleError, TensorExprError,
                ModelImportError, GraphError, QuantizationError, ModelFileError, ZooError):
        assert issubclass(cls, USER_ERRORS) and issubclass(cls, ValueError), cls


def test_the_parser_leaves_each_commands_machinery_unimported():
    """Building the parser (as every command does) imports no command's pipeline: a compile
    pays for neither the sweep's, the tuner's, the conformance suite's nor onnxruntime's."""
    probe = ("import sys; from codesign.cli.main import build_parser; build_parser(); "
             "import compiler.quant.accuracy; print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "codesign.cli.sweep" in loaded and "codesign.cli.tune" in loaded  # the parser was built
    for heavy in ("codesign.sweep.engine", "codesign.sweep.store", "codesign.tune.tuner",
                  "codesign.tune.measure", "codesign.run.op", "sim.conformance", "onnxruntime"):
        assert heavy not in loaded, heavy
