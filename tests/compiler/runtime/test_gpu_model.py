"""Whole float models on the GPU target: the same steps, buffers and launches run by the numpy
SIMT executor here (within float rounding of onnxruntime), and on a real GPU where one is."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from codesign import zoo
from compiler.frontend import import_onnx
from compiler.quant.accuracy import ort_session
from compiler.runtime.gpu import SimtExecutor, make_executor
from compiler.runtime.gpu_driver import gpu_available
from compiler.runtime.gpu_model import GpuModel
from compiler.target.gpu import gpu_preset

AVAILABLE, REASON = gpu_available()


def _check(name: str, tmp_path, executor, **options: int) -> GpuModel:  # type: ignore[no-untyped-def]
    path = tmp_path / f"{name}.onnx"
    onnx.save(zoo.build(name, **options), path)
    graph = import_onnx(str(path))
    model = GpuModel.compile(graph, executor, gpu_preset("sm_80"))
    feeds = zoo.sample_inputs(name, 1, seed=3, **options)[0]
    want = ort_session(path.read_bytes()).run(None, feeds)[0]
    got = model.run(feeds).outputs[graph.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    return model


@pytest.mark.slow
def test_digits_runs_every_node_on_the_gpu_target(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _check("digits", tmp_path, SimtExecutor())
    assert model.fallbacks() == []
    assert [(s.op, s.where) for s in model.steps] == [("Conv", "gpu"), ("Conv", "gpu"), ("MaxPool", "gpu"),
                                                      ("Flatten", "view"), ("Gemm", "gpu")]


def test_mlp_products_and_activations(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _check("mlp", tmp_path, SimtExecutor())
    assert model.fallbacks() == [] and len(model.kernels()) == 5
    launches = model.kernel_args()  # the last run's tensors, for timing kernels one by one
    assert [step.op for step, _ in launches] == ["Gemm", "Relu", "Gemm", "Relu", "Gemm"]  # MatMul+Add: Gemm
    for step, args in launches:
        assert step.kernel is not None
        func = step.kernel.ir.func
        assert len(args) == len(func.inputs) + len(func.outputs)
        sizes = [int(np.prod(t.shape)) for t in func.inputs + func.outputs]
        assert [int(np.prod(a.shape)) for a in args] == sizes
    fresh = GpuModel(model.graph, model.steps, SimtExecutor(), model.target)
    with pytest.raises(RuntimeError, match=r"kernel_args needs a run first"):
        fresh.kernel_args()


@pytest.mark.slow
def test_bert_tiny_short_sequence(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Embedding gathers and the id cast stay on the host (reported); everything else runs as
    GPU kernels: products, softmax, layer norms, transposes, GELU, tanh."""
    model = _check("bert-tiny", tmp_path, SimtExecutor(), seq_len=8)
    assert model.fallbacks() == ["Cast", "Gather"]


def test_unknown_executor_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU executor 'opencl'; known: cuda, simt"):
        make_executor("opencl")


@pytest.mark.skipif(not AVAILABLE, reason=f"needs a GPU: {REASON}")
def test_digits_on_the_gpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _check("digits", tmp_path, make_executor("cuda"))
