import json

import pytest

from codesign.cli import main
from codesign.tune import log

CONV = ["--in", "1,8,8,8", "--out-channels", "16", "--kernel", "3", "--pad", "1", "--config", "tiny"]
OTHER = ["--in", "1,8,8,8", "--out-channels", "8", "--kernel", "3", "--pad", "1", "--config", "tiny"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "tune.jsonl"
    assert main(["tune", "op", "conv2d", *CONV, "--trials", "12", "--max-insns", "300", "--workers", "0",
                 "--no-cache", "--log", str(path), "--json"]) == 0
    return path


def test_tune_op_logs_every_trial_and_the_default(tuned_log):
    records = log.read(tuned_log)
    assert [r.method for r in records] == ["model"] * 12 + ["default"]
    assert all(r.backend == "timing" and r.config.name == "tiny" for r in records)


def test_tune_op_resumes_from_its_log(capsys, tuned_log, tmp_path):
    path = tmp_path / "again.jsonl"
    path.write_text(tuned_log.read_text())
    code, out, _ = run(capsys, "tune", "op", "conv2d", *CONV, "--trials", "16", "--max-insns", "300",
                       "--workers", "0", "--no-cache", "--log", str(path), "--json")
    report = json.loads(out)
    assert code == 0 and report["trials"] == 16 and report["new_trials"] == 4
    assert len(log.read(path)) == 13 + 4 + 1


def test_op_with_tuning_log_uses_the_logged_best(capsys, tuned_log):
    best = log.best(log.read(tuned_log), *_workload_and_cfg())
    code, out, _ = run(capsys, "op", "conv2d", *CONV, "--backend", "timing", "--tuning-log", str(tuned_log),
                       "--json")
    result = json.loads(out)
    assert code == 0 and result["schedule_source"] == "tuning-log"
    assert result["schedule"]["knobs"] == best.knobs and result["cycles"] == best.cycles


def test_op_with_tuning_log_falls_back_to_the_default(capsys, tuned_log):
    code, out, _ = run(capsys, "op", "conv2d", *OTHER, "--tuning-log", str(tuned_log), "--json")
    plain = json.loads(run(capsys, "op", "conv2d", *OTHER, "--json")[1])
    result = json.loads(out)
    assert code == 0 and result["schedule_source"] == "default" and result["correct"] is True
    assert result["schedule"] == plain["schedule"]


def _workload_and_cfg():
    from compiler.ops.accel import Conv2d, Conv2dSpec
    from compiler.target import AcceleratorTarget
    from compiler.tune.workload import Workload
    from hw.config import PRESETS

    op = Conv2d(Conv2dSpec(1, 8, 8, 8, 16, 3, 1, 1), AcceleratorTarget(PRESETS["tiny"]))
    return Workload.of(op), PRESETS["tiny"]


@pytest.mark.parametrize(("argv", "message"), [
    (["tune", "op", "conv2d", *CONV, "--trials", "0"], "--trials must be at least 1, not 0"),
    (["tune", "op", "dense", "--m", "4", "--k", "32", "--n", "24", "--batch", "0"],
     "--batch must be at least 1, not 0"),
    (["tune", "op", "conv2d", *CONV, "--timeout", "0"], "--timeout must be positive, not 0.0"),
    (["tune", "op", "conv2d", *CONV, "--log", "."], "Is a directory"),
    (["op", "conv2d", *CONV, "--tuning-log", "missing.jsonl"], "No such file or directory: 'missing.jsonl'"),
    (["bench", "tune", "--seeds", "0"], "--seeds must be at least 1, not 0"),
])
def test_bad_input_is_one_line_and_exit_status_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_an_unreadable_log_names_its_line(capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("garbage\n{}\n")
    code, _, err = run(capsys, "op", "conv2d", *CONV, "--tuning-log", str(path))
    assert code == 2 and f"{path} line 1: not JSON" in err
    code, _, err = run(capsys, "tune", "op", "conv2d", *CONV, "--log", str(path))
    assert code == 2 and f"{path} line 1: not JSON" in err


def test_backend_must_be_timing_or_rtl(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tune", "op", "conv2d", *CONV, "--backend", "fsim"])
    assert exc.value.code == 2 and "invalid choice: 'fsim'" in capsys.readouterr().err
