"""`--backend gpu` and `--backends gpu`: refused in one line with the reason where no GPU runs;
the GPU device and its peak, with the model's kernels run by the SIMT executor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from codesign import zoo
from codesign.cli import main
from codesign.run.gpu import GpuDevice, check_precision, gpu_peak
from compiler.frontend import import_onnx
from compiler.runtime.gpu import SimtExecutor
from compiler.runtime.gpu_driver import gpu_available
from compiler.runtime.gpu_model import GpuModel
from compiler.target.gpu import gpu_preset
from hw.errors import InputError

AVAILABLE, REASON = gpu_available()
no_gpu_only = pytest.mark.skipif(AVAILABLE, reason="a GPU is present: the refusal is not taken")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpu") / "mlp.onnx"
    onnx.save(zoo.build("mlp"), path)
    return path


@no_gpu_only
@pytest.mark.parametrize("argv, message", [
    (["run", "{m}", "--backend", "gpu"], "codesign run: error: --backend gpu needs an NVIDIA GPU: no GPU"),
    (["compare", "{m}", "--backends", "gpu,onnxruntime"],
     "codesign compare: error: --backends gpu needs an NVIDIA GPU: no GPU"),
])
def test_without_a_gpu_the_commands_say_why(mlp: Path, argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a.replace("{m}", str(mlp)) for a in argv]) == 2
    assert message in capsys.readouterr().err


def test_the_gpu_runs_fp32_only(mlp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(mlp), "--backend", "gpu", "--precision", "int8"]) == 2
    assert "--backend gpu runs fp32, not int8" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"--backend gpu runs fp32, not int8"):
        check_precision("int8")


def test_gpu_device_times_a_run(mlp: Path) -> None:
    model = GpuModel.compile(import_onnx(str(mlp)), SimtExecutor(), gpu_preset("sm_90"))
    device = GpuDevice(model)
    feeds = zoo.sample_inputs("mlp", 1, seed=0)[0]
    result = device.infer(feeds)
    assert device.name == "gpu preset (sm_90)"
    assert result.latency_s is not None and result.latency_s > 0
    assert next(iter(result.outputs.values())).shape == (1, 10)
    assert np.isfinite(next(iter(result.outputs.values()))).all()


def test_gpu_peak_states_its_model() -> None:
    peak = gpu_peak(gpu_preset("sm_80"))
    assert peak.gops == pytest.approx(19491.8, rel=1e-4)
    assert peak.source == "modeled: 108 SMs x 64 FP32 lanes x 2 x 1.41 GHz"


def _simt_loader(path: str, input_shapes=None):  # type: ignore[no-untyped-def]
    """load_gpu as a GPU machine runs it, with the kernels run by the SIMT executor."""
    graph = import_onnx(path, input_shapes)
    model = GpuModel.compile(graph, SimtExecutor(), gpu_preset("sm_90"))
    return model, graph, Path(path).read_bytes(), 0.5


@pytest.fixture
def simt_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for a GPU: the availability check passes, models compile for the SIMT executor."""
    from codesign.run import gpu as run_gpu

    monkeypatch.setattr(run_gpu, "require_gpu", lambda what: None)
    monkeypatch.setattr(run_gpu, "load_gpu", _simt_loader)


def test_compare_puts_the_gpu_beside_onnxruntime(mlp: Path, simt_gpu: None) -> None:
    from codesign.compare import CompareRequest, compare

    report = compare(CompareRequest(str(mlp), backends=("gpu", "onnxruntime"), precisions=("fp32",),
                                    repeat=2, warmup=0))
    gpu, ort = report.results
    assert (gpu.backend, gpu.precision, gpu.timing, gpu.device) == ("gpu:fp32", "fp32", "measured",
                                                                    "gpu preset (sm_90)")
    assert gpu.cosine == pytest.approx(1.0, abs=1e-6) and gpu.top1_agreement == 1.0
    assert gpu.peak_source.startswith("modeled: 132 SMs x 128 FP32 lanes") and gpu.fallbacks == ()
    assert ort.backend == "onnxruntime:fp32"


def test_run_reports_the_gpu_like_a_host_backend(mlp: Path, simt_gpu: None) -> None:
    from codesign.run.host import run_host
    from hw.config import resolve

    feeds = zoo.sample_inputs("mlp", 2, seed=1)
    report = run_host(str(mlp), "gpu", "fp32", 1, feeds, resolve("vta"))
    data = report.to_json()
    assert data["backend"] == "gpu" and data["inputs"] == 2 and data["fallbacks"] == []
    assert data["cosine"] == pytest.approx(1.0, abs=1e-6) and data["top1_agreement"] == 1.0
    assert [row["where"] for row in data["operators"]] == ["gpu"] * 5
