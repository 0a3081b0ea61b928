"""`codesign tune model MODEL --target cpu`: the CPU tuning log, read back by `codesign
compile|run|compare --tuning-log`, and every refusal."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from codesign import zoo
from codesign.cli import main


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "digits.onnx"
    onnx.save(zoo.build("digits"), path)
    return path


@pytest.fixture(scope="module")
def tuned(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    log = tmp_path_factory.mktemp("logs") / "digits.json"
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["tune", "model", str(digits), "--target", "cpu", "--precision", "int8", "--repeat", "1",
                     "--log", str(log), "--json"]) == 0
    return log, json.loads(out.getvalue())


def test_tuning_measures_every_convolution_and_never_reports_a_slower_schedule(tuned) -> None:  # type: ignore[no-untyped-def]
    log, report = tuned
    assert report["target"] == "cpu" and report["precision"] == "int8"
    assert report["convolutions"] == 2 and report["untuned"] == 0 and report["log"] == str(log)
    assert {op["op"] for op in report["operators"]} <= {"conv2d", "qconv2d"}
    assert all(op["best_s"] <= op["default_s"] for op in report["operators"])
    assert report["tuned_conv_ms"] <= report["default_conv_ms"]
    record = json.loads(log.read_text())
    assert record["format"] == "codesign-cpu-tuning/1" and len(record["convolutions"]) == 2


@pytest.mark.parametrize("argv", [
    ["compile", "{model}", "--target", "cpu", "--precision", "int8", "--tuning-log", "{log}", "--json"],
    ["run", "{model}", "--backend", "cpu", "--precision", "int8", "--tuning-log", "{log}", "--json"],
])
def test_the_log_is_read_back(tuned, digits: Path, capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
                              argv: list[str]) -> None:
    args = [a.format(model=digits, log=tuned[0]) for a in argv]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("extra", "message"), [
    ([], "--target cpu needs --log FILE: the tuning log that codesign compile|run|compare "
         "--tuning-log read back"),
    (["--log", "x.json", "--budget", "0"], "--budget must be positive, not 0.0"),
    (["--log", "x.json", "--repeat", "0"], "--repeat must be at least 1, not 0"),
])
def test_bad_cpu_tuning_options_are_refused(digits: Path, capsys: pytest.CaptureFixture[str],
                                            extra: list[str], message: str) -> None:
    assert main(["tune", "model", str(digits), "--target", "cpu", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_precision_and_budget_belong_to_the_cpu_target(digits: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "model", str(digits), "--precision", "int8"]) == 2
    assert "--precision applies to --target cpu" in capsys.readouterr().err


def test_compare_refuses_a_log_that_is_no_cpu_tuning_log(digits: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["compare", str(digits), "--backends", "cpu", "--tuning-log", str(bad)]) == 2
    assert f"{bad} is no CPU tuning log" in capsys.readouterr().err
