"""The whole-model CPU target: int8 exactly the integer reference (zoo models, the graph the
accelerator runs), fp32 within float rounding of onnxruntime, every op native, fused epilogues,
threads that change no result."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from codesign import zoo
from compiler.driver import compile_cpu
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph
from compiler.quant.accuracy import ort_session
from compiler.runtime.cpu_model import CpuModel
from compiler.runtime.model import reference_boundary
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from hw.errors import InputError


def _model(name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, bytes]:
    path = tmp_path_factory.mktemp("models") / f"{name}.onnx"
    onnx.save(zoo.build(name), path)
    return import_onnx(str(path)), path.read_bytes()


@pytest.fixture(scope="module", params=["digits", "mlp"])
def model(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Graph, bytes]:
    return (request.param, *_model(request.param, tmp_path_factory))


def _calibration(name: str) -> list[dict[str, np.ndarray]]:
    return zoo.sample_inputs(name, 8, seed=1000)


def test_int8_is_exactly_the_integer_reference(model: tuple[str, Graph, bytes]) -> None:
    name, graph, _ = model
    cpu = compile_cpu(graph, "int8", _calibration(name), shallow_target=AcceleratorTarget(PRESETS["vta"]))
    assert cpu.precision == "int8" and cpu.fallbacks() == []
    for feeds in zoo.sample_inputs(name, 3, seed=0):
        result = cpu.run(feeds)
        outputs, boundary = reference_boundary(cpu.graph, feeds, result.handed_in)
        assert boundary and set(boundary) == set(result.boundary)
        for key, want in boundary.items():
            assert np.array_equal(result.boundary[key], want), key
        for key, want in outputs.items():
            np.testing.assert_allclose(result.outputs[key], want, rtol=1e-4, atol=1e-5)


def test_fp32_agrees_with_onnxruntime(model: tuple[str, Graph, bytes]) -> None:
    name, graph, data = model
    cpu = compile_cpu(graph, "fp32")
    assert cpu.precision == "fp32" and cpu.fallbacks() == []
    session = ort_session(data, threads=1)
    for feeds in zoo.sample_inputs(name, 3, seed=0):
        want = session.run(None, feeds)[0]
        got = cpu.run(feeds).outputs[graph.outputs[0]]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_convolutions_absorb_their_relu(tmp_path_factory: pytest.TempPathFactory) -> None:
    graph, _ = _model("digits", tmp_path_factory)
    ops = [s.op for s in compile_cpu(graph, "fp32").steps]
    assert ops.count("Conv+Relu") == 2 and "Relu" not in ops


def test_bert_tiny_products_absorb_bias_residual_and_gelu(tmp_path_factory: pytest.TempPathFactory) -> None:
    graph, data = _model("bert-tiny", tmp_path_factory)
    cpu = compile_cpu(graph, "fp32")
    ops = [s.op for s in cpu.steps]
    # per layer: Q, K, V with their bias; the attention output and the second FFN product with
    # bias and residual; the first FFN product with bias and GELU
    assert ops.count("MatMul+Add") == 6 and ops.count("MatMul+Add+Add") == 4
    assert ops.count("MatMul+Add+Gelu") == 2 and "Gelu" not in ops
    session = ort_session(data, threads=1)
    for feeds in zoo.sample_inputs("bert-tiny", 2, seed=0):
        names = {i.name for i in session.get_inputs()}
        want = session.run(None, {k: v for k, v in feeds.items() if k in names})
        got = cpu.run(feeds).outputs
        for name, value in zip(graph.outputs, want, strict=True):
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-4 * float(np.abs(value).max()))


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_threads_change_no_result(precision: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    graph, _ = _model("digits", tmp_path_factory)
    calib = _calibration("digits")
    one = compile_cpu(graph, precision, calib, threads=1)
    two = compile_cpu(graph, precision, calib, threads=2)
    assert any(len(s.calls) == 2 for s in two.steps)  # some step does run on two threads
    for feeds in zoo.sample_inputs("digits", 2, seed=0):
        a, b = one.run(feeds).outputs, two.run(feeds).outputs
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_bad_threads_and_precision_are_refused(tmp_path_factory: pytest.TempPathFactory) -> None:
    graph, _ = _model("mlp", tmp_path_factory)
    with pytest.raises(ValueError, match=r"threads must be an int >= 1, not 0"):
        CpuModel.compile(graph, threads=0)
    with pytest.raises(InputError, match=r"precision must be one of fp32, int8, not 'fp16'"):
        compile_cpu(graph, "fp16")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "bert-tiny"])
def test_int8_is_exact_on_the_large_zoo_models(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The pair-packed int8 convolutions (vpmaddwd) and every other kernel, bit for bit against
    the quantized graph's integer reference, on the zoo's large models (one input each)."""
    graph, _ = _model(name, tmp_path_factory)
    cpu = compile_cpu(graph, "int8", zoo.sample_inputs(name, 4, seed=1000),
                      shallow_target=AcceleratorTarget(PRESETS["vta"]))
    assert cpu.precision == "int8" and cpu.fallbacks() == []
    feeds = zoo.sample_inputs(name, 1, seed=0)[0]
    result = cpu.run(feeds)
    outputs, boundary = reference_boundary(cpu.graph, feeds, result.handed_in)
    assert boundary and set(boundary) == set(result.boundary)
    for key, want in boundary.items():
        assert np.array_equal(result.boundary[key], want), key
    for key, want in outputs.items():
        np.testing.assert_allclose(result.outputs[key], want, rtol=1e-4, atol=1e-5)
