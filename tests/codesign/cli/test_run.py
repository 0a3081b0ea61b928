"""`codesign run` and `codesign compile` on whole models: exactness against the integer reference,
agreement with onnxruntime, a compiled model file, and every bad input with its own message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from codesign import zoo
from codesign.cli import main


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(zoo.build("mlp"), path)
    return path


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:  # type: ignore[type-arg]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_run_mlp_exact_and_close_to_fp32(mlp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(capsys, ["run", str(mlp), "--config", "tiny", "--inputs", "4", "--json"])
    assert report["correct_int8"] is True and report["inputs"] == 4
    assert report["cosine"] > 0.99 and report["top1_agreement"] >= 0.75
    lo, hi = report["top1_ci95"]
    assert lo < report["top1_agreement"] <= hi and hi - lo > 0.2  # four inputs say little
    assert 0 < report["rms_err"] <= report["max_abs_err"]
    assert report["offloaded_macs_fraction"] > 0.9
    ops = [(r["op"], r["where"]) for r in report["operators"]]
    assert ("QGemm", "accel") in ops and report["cycles"] is None  # fsim counts no cycles
    for key in ("max_abs_err", "latency_ms", "compile_s", "run_s"):
        assert report[key] is not None
    assert 0 < report["arena_bytes"] <= report["arena_bytes_unshared"]
    assert report["device_dram_bytes"] > 0  # the device arena of the QGemms' programs


def test_run_on_the_timing_model_reports_cycles(mlp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(capsys, ["run", str(mlp), "--config", "tiny", "--backend", "timing", "--json"])
    accel = [r for r in report["operators"] if r["where"] == "accel"]
    assert report["correct_int8"] is None and report["cycles"] == sum(r["cycles"] for r in accel) > 0
    assert report["latency_ms"] > report["cycles"] / 100e3 * 0.999  # cycles at the clock, plus host time


def test_compiled_model_file_runs_the_same(mlp: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mlp.cmodel"
    summary = _json(capsys, ["compile", str(mlp), "-o", str(out), "--config", "tiny", "--json"])
    assert out.exists() and summary["accelerator_steps"] >= 1
    a = _json(capsys, ["run", str(mlp), "--config", "tiny", "--backend", "timing", "--json"])
    b = _json(capsys, ["run", str(out), "--backend", "timing", "--json"])
    assert a["cycles"] == b["cycles"] and a["config"] == b["config"] == "tiny"
    assert a["device_dram_bytes"] == b["device_dram_bytes"] > 0  # the arena is planned again on load
    assert main(["run", str(out), "--config", "vta"]) == 2
    assert "was compiled for config tiny, not vta" in capsys.readouterr().err


def test_input_file(mlp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    samples = zoo.sample_inputs("mlp", 2, seed=3)
    path = tmp_path / "x.npz"
    np.savez(path, **{k: np.stack([s[k] for s in samples]) for k in samples[0]})
    report = _json(capsys, ["run", str(mlp), "--config", "tiny", "--input-file", str(path), "--json"])
    assert report["inputs"] == 2 and report["correct_int8"] is True


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no traceback
    return err


def _model_file(tmp_path: Path, nodes: list, shape: list) -> Path:  # type: ignore[type-arg]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path


def test_bad_inputs_exit_2_with_their_own_message(mlp: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert "no such file" in _error(capsys, ["run", str(tmp_path / "nope.onnx")])
    (tmp_path / "text.onnx").write_bytes(b"hello, not a model\n")
    assert "not an ONNX model" in _error(capsys, ["run", str(tmp_path / "text.onnx")])
    data = mlp.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    assert "truncated ONNX model" in _error(capsys, ["run", str(tmp_path / "cut.onnx")])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("LSTM", ["r"], ["y"])]
    lstm = _model_file(tmp_path, nodes, [1, 2, 3])
    assert "unsupported operator LSTM" in _error(capsys, ["run", str(lstm)])
    dynamic = _model_file(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], ["batch", 8])
    assert "pass --input-shape x=1,8" in _error(capsys, ["run", str(dynamic)])
    bad = tmp_path / "bad.npz"
    np.savez(bad, input=np.zeros((1, 1, 63), np.float32))
    assert "the model input takes [1,64]: give [N,1,64]" in _error(
        capsys, ["run", str(mlp), "--input-file", str(bad)])
    np.savez(bad, input=np.zeros((1, 1, 64), np.complex64))
    assert "array 'input' is complex64, the model input takes float32" in _error(
        capsys, ["run", str(mlp), "--input-file", str(bad)])
    np.savez(bad, other=np.zeros((1, 1, 64), np.float32), more=np.zeros(1))
    assert "no array for model input 'input'" in _error(capsys, ["run", str(mlp), "--input-file", str(bad)])
    assert "must be NAME=D1,D2" in _error(capsys, ["run", str(mlp), "--input-shape", "x=1,a"])
    assert "--inputs must be at least 1, not 0" in _error(capsys, ["run", str(mlp), "--inputs", "0"])
    assert "ends in .cmodel" in _error(capsys, ["compile", str(mlp), "-o", str(tmp_path / "x.bin")])
    (tmp_path / "junk.cmodel").write_bytes(b"junk")
    assert "not a compiled model file" in _error(capsys, ["run", str(tmp_path / "junk.cmodel")])


def test_a_qdq_model_runs_with_its_own_scales(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.compiler.quant.ort_models import quantize_qdq, small_resnet

    rng = np.random.default_rng(1)
    calib = [{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(8)]
    path = tmp_path / "qdq.onnx"
    onnx.save(quantize_qdq(small_resnet(), calib, tmp_path), path)
    report = _json(capsys, ["run", str(path), "--config", "tiny", "--inputs", "2", "--json"])
    assert report["correct_int8"] is True and report["cosine"] > 0.99
    assert ("QConv", "accel") in [(r["op"], r["where"]) for r in report["operators"]]
    err = _error(capsys, ["run", str(path), "--config", "tiny", "--float-layers", "*"])
    assert "is quantized already (QuantizeLinear/DequantizeLinear): --float-layers applies to a float" in err
    err = _error(capsys, ["sensitivity", str(path), "--config", "tiny"])
    assert "is quantized already (QuantizeLinear/DequantizeLinear): sensitivity applies to a float" in err


@pytest.mark.rtl
def test_run_on_the_rtl(mlp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(capsys, ["run", str(mlp), "--config", "tiny", "--backend", "rtl", "--json"])
    timed = _json(capsys, ["run", str(mlp), "--config", "tiny", "--backend", "timing", "--json"])
    assert report["correct_int8"] is True and report["cycles"] == timed["cycles"]  # timing is cycle-exact


def test_tune_model_then_run_with_the_tuning_log(mlp: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    tune_log = tmp_path / "mlp.tune"
    tuned = _json(capsys, ["tune", "model", str(mlp), "--config", "tiny", "--trials", "12", "--workers", "0",
                           "--no-cache", "--log", str(tune_log), "--json"])
    assert [o["op"] for o in tuned["operators"]] == ["dense", "dense"]
    assert tuned["tuned_cycles"] <= tuned["default_cycles"] and tune_log.exists()
    base = ["run", str(mlp), "--config", "tiny", "--json"]
    default = _json(capsys, [*base, "--backend", "timing"])
    with_log = _json(capsys, [*base, "--backend", "timing", "--tuning-log", str(tune_log)])
    assert with_log["cycles"] == tuned["tuned_cycles"] <= default["cycles"] == tuned["default_cycles"]
    assert _json(capsys, [*base, "--tuning-log", str(tune_log)])["correct_int8"] is True
    assert main([*base, "--tuning-log", str(tmp_path / "none.tune")]) == 2
    assert "--tuning-log" in capsys.readouterr().err


def test_offload_shallow_puts_a_first_layer_on_the_accelerator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "digits.onnx"
    onnx.save(zoo.build("digits"), path)  # its first convolution reads one channel

    def first_conv(argv: list[str]) -> tuple[str, str]:
        report = _json(capsys, [*argv, "--backend", "timing", "--json"])
        convs = (r for r in report["operators"] if r["op"] in ("Conv", "QConv"))
        return next((str(r["op"]), str(r["where"])) for r in convs)

    # on the host it stays float (int8 buys it nothing there); offloaded, it is quantized
    assert first_conv(["run", str(path)]) == ("Conv", "host")
    assert first_conv(["run", str(path), "--offload-shallow"]) == ("QConv", "accel")
    plain, offloaded = tmp_path / "plain.cmodel", tmp_path / "offloaded.cmodel"
    _json(capsys, ["compile", str(path), "-o", str(plain), "--json"])
    _json(capsys, ["compile", str(path), "-o", str(offloaded), "--offload-shallow", "--json"])
    assert first_conv(["run", str(plain)]) == ("Conv", "host")
    assert first_conv(["run", str(offloaded)]) == ("QConv", "accel")
    err = _error(capsys, ["run", str(plain), "--offload-shallow"])
    assert "was compiled with shallow convolutions on the host; compile the ONNX model again" in err


def test_float_layers_stay_float_on_the_host(mlp: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", str(mlp), "--config", "tiny", "--inputs", "4", "--json"]
    plain = _json(capsys, base)
    kept = _json(capsys, [*base, "--float-layers", "fc2*", "--float-layers", "fc3"])  # output fc2.Add
    where = {r["name"]: (r["op"], r["where"]) for r in kept["operators"]}
    assert where["relu1"] == ("QGemm", "accel") and where["fc2.Add"] == where["logits"] == ("Gemm", "host")
    assert kept["correct_int8"] is True
    assert kept["offloaded_macs_fraction"] < 0.5 < plain["offloaded_macs_fraction"]
    assert kept["rms_err"] < plain["rms_err"]  # two int8 layers fewer
    listed = _json(capsys, [*base, "--float-layers", "fc2.MatMul,fc3"])  # by node names, one argument
    assert {r["name"]: (r["op"], r["where"]) for r in listed["operators"]} == where
    err = _error(capsys, [*base, "--float-layers", "fc4*"])
    assert "--float-layers 'fc4*' matches no convolution or dense layer of mlp (its 3 layers: fc1, fc2" in err
    out = tmp_path / "mlp.cmodel"
    _json(capsys, ["compile", str(mlp), "-o", str(out), "--config", "tiny", "--json"])
    err = _error(capsys, ["run", str(out), "--float-layers", "fc3"])
    assert "is compiled already: --float-layers applies when compiling an ONNX model" in err


def test_sensitivity_ranks_the_layers_by_what_keeping_them_float_gains(
    mlp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sensitivity", str(mlp), "--config", "tiny", "--inputs", "4"]
    report = _json(capsys, [*base, "--json"])
    assert report["model"] == "mlp" and report["inputs"] == 4 and report["float_already"] == ["fc3"]
    rows = report["layers"]
    assert sorted(r["layer"] for r in rows) == ["fc1", "fc2.MatMul"]
    gains = [r["gain"] for r in rows]
    assert gains == sorted(gains, reverse=True) and gains[0] > 0
    for r in rows:
        assert r["gain"] == pytest.approx(report["baseline_rms_err"] - r["rms_err"])
        assert 0 < r["macs_fraction"] < 1
    one = _json(capsys, [*base, "--layers", "fc2*", "--json"])
    assert [r["layer"] for r in one["layers"]] == ["fc2.MatMul"]
    both = _json(capsys, [*base, "--groups", "fc[12]*", "--json"])
    (row,) = both["layers"]
    assert row["layer"] == "fc[12]*" and row["layers"] == ["fc1", "fc2.MatMul"]
    assert row["macs_fraction"] == pytest.approx(sum(r["macs_fraction"] for r in rows))
    assert row["rms_err"] < min(r["rms_err"] for r in rows)  # both float: less error than either alone
    err = _error(capsys, [*base, "--groups", "fc9*"])
    assert "--groups 'fc9*' matches no convolution or dense layer of mlp" in err
    assert "--inputs must be at least 1, not 0" in _error(capsys, [*base[:4], "--inputs", "0"])
    rc = main(base)
    printed = capsys.readouterr()
    assert rc == 0 and "fc2.MatMul" in printed.out, printed.err[-400:]  # the table
    err = _error(capsys, [*base, "--layers", "fc9"])
    assert "--layers 'fc9' matches no convolution or dense layer of mlp" in err
    out = tmp_path / "mlp.cmodel"
    _json(capsys, ["compile", str(mlp), "-o", str(out), "--config", "tiny", "--json"])
    err = _error(capsys, ["sensitivity", str(out)])
    assert "sensitivity quantizes the float model; give its ONNX file" in err


def test_quantizer_options_run_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "digits.onnx"
    onnx.save(zoo.build("digits"), path)
    best = _json(capsys, ["run", str(path), "--inputs", "2", "--json"])  # gptq, bias correction
    argv = ["run", str(path), "--inputs", "2", "--rounding", "nearest", "--no-bias-correction", "--json"]
    plain = _json(capsys, argv)
    assert plain["correct_int8"] is True and best["correct_int8"] is True
    assert plain["max_abs_err"] != best["max_abs_err"]  # other int8 weights and biases
    explicit = ["run", str(path), "--inputs", "2", "--rounding", "gptq", "--bias-correction", "--json"]
    assert _json(capsys, explicit)["max_abs_err"] == best["max_abs_err"]
    fewer = _json(capsys, ["run", str(path), "--inputs", "2", "--calibration-inputs", "4", "--json"])
    assert fewer["correct_int8"] is True and fewer["max_abs_err"] != best["max_abs_err"]
    err = _error(capsys, ["run", str(path), "--calibration-inputs", "0"])
    assert "--calibration-inputs must be at least 1, not 0" in err
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(path), "--rounding", "stochastic"])
    assert exit_.value.code == 2 and "invalid choice: 'stochastic'" in capsys.readouterr().err


def test_a_second_compile_loads_its_host_kernels_from_the_disk_cache(tmp_path: Path) -> None:
    """Two processes (the in-process cache would hide the disk): the second compiles no kernel."""
    model = tmp_path / "mlp.onnx"
    onnx.save(zoo.build("mlp"), model)
    env = {**os.environ, "CODESIGN_KERNEL_CACHE": str(tmp_path / "kernels")}
    reports = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "codesign", "compile", str(model), "-o",
                               str(tmp_path / "mlp.cmodel"), "--json"], capture_output=True, text=True,
                              env=env, check=True)
        reports.append(json.loads(proc.stdout))
    written = len(list((tmp_path / "kernels").glob("*.o")))
    assert reports[0]["kernels_from_disk_cache"] == 0 and written > 0
    assert reports[1]["kernels_from_disk_cache"] == written


def test_the_jit_helper_changes_no_compiled_model(tmp_path: Path) -> None:
    """`codesign compile` with its JIT helper process (the command line's default) and without:
    the same .cmodel byte for byte, the same kernel objects in the disk cache, and the helper's
    kernels run the model exactly."""
    model = tmp_path / "mlp.onnx"
    onnx.save(zoo.build("mlp"), model)
    made = {}
    for mode in ("on", "off"):
        kernels = tmp_path / f"kernels-{mode}"
        env = {**os.environ, "CODESIGN_JIT_HELPER": mode,
               "CODESIGN_KERNEL_CACHE": str(kernels)}
        out = tmp_path / f"{mode}.cmodel"
        subprocess.run([sys.executable, "-m", "codesign", "compile", str(model), "-o", str(out), "--json"],
                       capture_output=True, text=True, env=env, check=True)
        objects = {p.name: p.read_bytes() for p in kernels.glob("*.o")}
        made[mode] = (out.read_bytes(), objects)
    assert made["on"][0] == made["off"][0]
    assert made["on"][1] == made["off"][1] and len(made["on"][1]) > 3
    env = {**os.environ, "CODESIGN_JIT_HELPER": "on"}
    command = ["run", str(tmp_path / "on.cmodel"), "--backend", "fsim", "--inputs", "2", "--json"]
    proc = subprocess.run([sys.executable, "-m", "codesign", *command], capture_output=True, text=True,
                          env=env, check=True)
    assert json.loads(proc.stdout)["correct_int8"] is True


def test_a_second_fsim_run_replays_its_programs_from_the_disk_cache(tmp_path: Path) -> None:
    """Two processes: the first records each accelerator Program's run, the second replays every
    one of them from its first input, with the same figures."""
    model = tmp_path / "mlp.onnx"
    onnx.save(zoo.build("mlp"), model)
    env = {**os.environ, "CODESIGN_FSIM_CACHE": str(tmp_path / "fsim")}
    reports = []
    for _ in range(2):
        command = ["run", str(model), "--backend", "fsim", "--inputs", "2", "--json"]
        proc = subprocess.run([sys.executable, "-m", "codesign", *command], capture_output=True, text=True,
                              env=env, check=True)
        reports.append(json.loads(proc.stdout))
    kept = len(list((tmp_path / "fsim").glob("*.pkl")))
    accel = sum(r["where"] == "accel" for r in reports[0]["operators"])
    assert kept == accel > 0
    assert reports[0]["fsim_records_from_disk"] == 0 and reports[1]["fsim_records_from_disk"] == kept
    # every Program readied before the first input (recorded, then loaded), outside run_s
    assert [r["prepared_steps"] for r in reports] == [accel, accel]
    assert all(r["setup_s"] > 0 for r in reports)
    for key in ("correct_int8", "cosine", "max_abs_err", "top1_agreement"):
        assert reports[1][key] == reports[0][key]
    assert reports[0]["correct_int8"] is True


def test_plot_draws_the_per_layer_cycles(mlp: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    figure = tmp_path / "layers.png"
    report = _json(capsys, ["run", str(mlp), "--config", "tiny", "--backend", "timing", "--plot", str(figure),
                            "--json"])
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all("stats" not in r for r in report["operators"])  # the counters feed the figure only


@pytest.mark.parametrize(("extra", "message"), [
    (["--plot", "x.png"], "--plot needs --backend timing or rtl: fsim counts no accelerator cycles"),
    (["--backend", "onnxruntime", "--plot", "x.png"],
     "--plot needs --backend timing or rtl: onnxruntime counts no accelerator cycles"),
    (["--backend", "timing", "--plot", "x.txt"], "--plot x.txt: a figure file ends in .png, .svg, .pdf"),
    (["--backend", "timing", "--plot", "nowhere/x.png"], "--plot nowhere/x.png: no such folder nowhere"),
])
def test_bad_plot_requests(mlp: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                           message: str) -> None:
    assert message in _error(capsys, ["run", str(mlp), *extra])


def test_user_data_flags_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trained digits CNN with --calibration-data and --eval-data as plain [N, 1, 8, 8]
    batches (the model's own batch axis split into samples) and labels: top-1/top-5 of fp32 and
    int8 with intervals, against the labels the zoo's own test of the model uses."""
    model = tmp_path / "digits.onnx"
    onnx.save(zoo.build("digits"), model)
    split = zoo.digits_split()
    cal, ev = tmp_path / "cal.npz", tmp_path / "ev.npz"
    np.savez(cal, input=split.train_images[:16])
    np.savez(ev, input=split.test_images[:40])
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"{int(y)}\n" for y in split.test_labels[:40]))
    report = _json(capsys, ["run", str(model), "--config", "tiny", "--calibration-data", str(cal),
                            "--eval-data", str(ev), "--labels", str(labels), "--json"])
    assert report["inputs"] == 40 and report["correct_int8"] is True
    fp32, int8 = report["fp32_accuracy"], report["int8_accuracy"]
    assert fp32["count"] == int8["count"] == 40 and int8["top1"] >= 0.9 and fp32["top1"] >= 0.9
    assert fp32["top5"] >= fp32["top1"] and fp32["top1_ci95"][0] <= fp32["top1"] <= fp32["top1_ci95"][1]


def test_data_flag_errors_come_before_compiling(mlp: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.npz"
    np.savez(ev, input=np.zeros((3, 64), np.float32))
    assert "--labels x.txt labels --eval-data samples; give --eval-data too" in _error(
        capsys, ["run", str(mlp), "--labels", "x.txt"])
    assert "--labels " in _error(capsys, ["run", str(mlp), "--eval-data", str(ev), "--labels",
                                          str(tmp_path / "none.txt")])
    assert "--preprocess applies to a folder of images" in _error(
        capsys, ["run", str(mlp), "--eval-data", str(ev), "--preprocess", "torchvision"])
    assert "--calibration-data " in _error(capsys, ["compile", str(mlp), "-o", str(tmp_path / "m.cmodel"),
                                                    "--calibration-data", str(tmp_path / "none")])
    bad = tmp_path / "bad.npz"
    np.savez(bad, input=np.zeros((3, 65), np.float32))
    assert "the model input takes [1,64]" in _error(
        capsys, ["sensitivity", str(mlp), "--eval-data", str(bad)])
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.png").write_bytes(b"not a png")
    assert "an image folder feeds a 4-d model input, not one of shape [1, 64]" in _error(
        capsys, ["run", str(mlp), "--backend", "cpu",
                                                     "--eval-data", str(tmp_path / "imgs")])


def test_synthetic_calibration_warns_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _model_file(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [1, 8])
    assert main(["compile", str(model), "-o", str(tmp_path / "m.cmodel"), "--json"]) == 0
    err = capsys.readouterr().err
    assert "codesign compile: warning: g is calibrated on synthetic inputs, which are not " \
        "representative" in err


def test_a_compile_collects_young_objects_less_often_and_restores_the_collector(
        mlp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from codesign.cli.run import COMPILE_GC_YOUNG
    from codesign.run import model

    seen = []
    real = model.load_model

    def load_model(*args: object, **kw: object) -> object:
        seen.append(gc.get_threshold())
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "load_model", load_model)
    before = gc.get_threshold()
    out = tmp_path / "m.cmodel"
    report = _json(capsys, ["compile", str(mlp), "--config", "tiny", "-o", str(out), "--json"])
    assert report["steps"] >= 1 and out.is_file()
    assert seen == [(COMPILE_GC_YOUNG, *before[1:])] and gc.get_threshold() == before
