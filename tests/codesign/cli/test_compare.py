"""`codesign compare` and the host backends of `codesign run`/`compile`: JSON that parses, the
figure, and every bad input as one line with exit status 2 and its own message."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import onnx
import pytest

from codesign import zoo
from codesign.cli import main
from codesign.compare import Peak

# the package exports a function of that name: the module itself, for monkeypatching
compare_module = importlib.import_module("codesign.compare.compare")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(zoo.build("mlp"), path)
    return path


def test_compare_json_and_figure(mlp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare_module, "cpu_peak", lambda threads: Peak(100.0, "stated"))
    argv = ["compare", str(mlp), "--config", "tiny", "--config", "vta", "--backends", "accel,cpu",
            "--precision", "int8", "--repeat", "2", "--json", "-o", str(tmp_path)]
    assert main(argv) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert [r["backend"] for r in report["results"]] == ["accel:tiny", "accel:vta", "cpu:int8"]
    assert report["model"] == "mlp" and report["results"][2]["energy_mj"] is None
    assert (tmp_path / "mlp_compare.png").stat().st_size > 0 and (tmp_path / "mlp_compare.svg").exists()


def test_compare_table(mlp: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare_module, "cpu_peak", lambda threads: Peak(100.0, "stated"))
    assert main(["compare", str(mlp), "--backends", "cpu", "--precision", "fp32", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "cpu:fp32" in out and "measured" in out and "fastest: cpu:fp32" in out


def test_run_and_compile_on_the_cpu(mlp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(mlp), "--backend", "cpu", "--precision", "int8", "--inputs", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["correct_int8"] is True and report["fallbacks"] == [] and report["latency"]["runs"] == 2
    assert report["top1_ci95"][0] <= report["top1_agreement"] <= report["top1_ci95"][1]
    assert report["rms_err"] >= 0.0
    assert main(["run", str(mlp), "--backend", "onnxruntime", "--threads", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cosine"] == pytest.approx(1.0)
    assert main(["compile", str(mlp), "--target", "cpu", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["precision"] == "fp32" and summary["native_steps"] == summary["steps"]


@pytest.mark.parametrize(("argv", "message"), [
    (["compare", "{m}", "--backends", "accel,tpu"],
     "unknown backend 'tpu'; known: accel, cpu, onnxruntime, gpu"),
    (["compare", "{m}", "--backends", "accel", "--precision", "fp32"],
     "--precision applies to the cpu and onnxruntime backends; the accelerator runs int8"),
    (["compare", "{m}", "--threads", "0"], "--threads must be at least 1, not 0"),
    (["compare", "{m}", "--repeat", "0"], "--repeat must be at least 1, not 0"),
    (["compare", "{m}", "--config", "nope"], "'nope' is neither a preset"),
    (["compare", "{m}", "--precision", "fp16"], "unknown precision 'fp16'; known: fp32, int8"),
    (["compare", "{m}", "--backends", ","], "--backends ',' names nothing"),
    (["compare", "{m}", "--backends", "cpu", "--config", "vta"],
     "--config applies to the accel backend, which --backends leaves out"),
    (["compare", "missing.onnx"], "missing.onnx: no such model file"),
    (["run", "{m}", "--backend", "fsim", "--precision", "fp32"],
     "--precision applies to --backend cpu or onnxruntime; the accelerator runs int8 on its simulator"),
    (["run", "{m}", "--backend", "timing", "--threads", "2"],
     "--threads applies to --backend cpu or onnxruntime; the accelerator runs int8 on its simulator"),
    (["run", "{m}", "--backend", "cpu", "--threads", "0"], "--threads must be at least 1, not 0"),
    (["run", "x.cmodel", "--backend", "cpu"], "x.cmodel: --backend cpu runs an ONNX model, not a .cmodel"),
    (["compile", "{m}", "--target", "cpu", "-o", "x.cmodel"], "-o x.cmodel: --target cpu writes no file"),
    (["compile", "{m}"], "-o MODEL.cmodel is required for --target accel"),
    (["compile", "{m}", "--precision", "int8", "-o", "x.cmodel"],
     "--precision applies to --target cpu; the accelerator runs int8 on its simulator"),
])
def test_bad_inputs_exit_2(mlp: Path, argv: list[str], message: str,
                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a.replace("{m}", str(mlp)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith(f"codesign {argv[0]}: error: ")
