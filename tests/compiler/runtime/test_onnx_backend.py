"""WorkbenchBackend: static models imported at prepare, shapes and parameters left to run time
bound from the data, the native path equal to the interpreter, and a -1 batch dimension bound by
`--input-shape` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from codesign.cli import main
from compiler.errors import ModelImportError
from compiler.frontend import import_onnx
from compiler.runtime.onnx_backend import WorkbenchBackend
from tests.compiler.frontend.onnx_models import ort_run


def _conv_relu(batch: int | str) -> onnx.ModelProto:
    """Conv 3x3 (8 filters) + Relu on x of (batch, 3, 48, 192); `batch` -1, a name or ''."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 48, 192])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "conv_relu", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _reshape_by_input() -> onnx.ModelProto:
    """y = Reshape(x, shape) with `shape` a graph input (as the suite's node cases pass it)."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])]
    graph = helper.make_graph(nodes, "r", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("batch", [-1, "N", ""])
def test_symbolic_batch_bound_from_the_data(batch: int | str) -> None:
    model = _conv_relu(batch)
    x = np.random.default_rng(1).standard_normal((2, 3, 48, 192)).astype(np.float32)
    (y,) = WorkbenchBackend.run_model(model, [x])
    np.testing.assert_allclose(y, ort_run(model, {"x": x})["y"], rtol=1e-5, atol=1e-5)


def test_minus_one_batch_bound_by_input_shapes() -> None:
    graph = import_onnx(_conv_relu(-1), {"x": (4, 3, 48, 192)})
    assert graph.values["y"].shape == (4, 8, 48, 192)


def test_minus_one_batch_unbound_says_what_to_pass() -> None:
    with pytest.raises(ModelImportError, match=r"input 'x' dimension 0 \('-1'\) is symbolic; "
                       r"pass --input-shape x=1,3,48,192"):
        import_onnx(_conv_relu(-1))


def test_parameter_inputs_are_frozen_per_value() -> None:
    rep = WorkbenchBackend.prepare(_reshape_by_input())
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (a,) = rep.run([x, np.array([6, 4], np.int64)])
    (b,) = rep.run({"x": x, "shape": np.array([4, -1], np.int64)})
    assert a.shape == (6, 4) and b.shape == (4, 6)
    np.testing.assert_array_equal(b, x.reshape(4, 6))
    assert len(rep.cache) == 2


def test_parameter_not_constant_message() -> None:
    with pytest.raises(ModelImportError, match=r"shape \(input 'shape'\) is not a constant and cannot be "
                       r"computed from static shapes"):
        import_onnx(_reshape_by_input())


def test_native_path_equals_the_interpreter() -> None:
    model = _conv_relu(1)
    x = np.random.default_rng(2).standard_normal((1, 3, 48, 192)).astype(np.float32)
    (native,) = WorkbenchBackend.prepare(model, native=True).run([x])
    (interp,) = WorkbenchBackend.prepare(model).run([x])
    np.testing.assert_allclose(native, interp, rtol=1e-5, atol=1e-5)


def test_old_opset_is_upgraded() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    graph = helper.make_graph(nodes, "old", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    (y,) = WorkbenchBackend.run_model(model, np.array([-1.0, 0.0, 2.0], np.float32))
    np.testing.assert_array_equal(y, [0.0, 0.0, 2.0])


def test_only_the_cpu_device() -> None:
    assert WorkbenchBackend.supports_device("CPU") and not WorkbenchBackend.supports_device("CUDA")
    with pytest.raises(ModelImportError, match="device 'CUDA' is not supported"):
        WorkbenchBackend.prepare(_conv_relu(1), "CUDA")


def test_cli_runs_a_minus_one_batch_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Must-show 5: `codesign run model.onnx --input-shape x=4,3,48,192` on a -1 batch model."""
    path = tmp_path / "neg.onnx"
    onnx.save(_conv_relu(-1), path)
    argv = ["run", str(path), "--backend", "cpu", "--input-shape", "x=4,3,48,192", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cosine"] > 0.9999


def test_native_path_runs_resize_and_prelu_natively() -> None:
    """A detection neck's nearest 2x upsampling and a PRelu: native kernels, not the interpreter."""
    slope = numpy_helper.from_array(np.full((4, 1, 1), 0.25, np.float32), "slope")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["p"]),
             helper.make_node("Resize", ["p", "", "scales"], ["y"], mode="nearest")]
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 8])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "neck", [x_info], [y_info], [slope, scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rep = WorkbenchBackend.prepare(model, native=True)
    assert rep.static is not None and rep.static.cpu is not None
    assert [s.where for s in rep.static.cpu.steps] == ["host", "host"]
    x = np.random.default_rng(3).standard_normal((1, 4, 6, 8)).astype(np.float32)
    (y,) = rep.run([x])
    np.testing.assert_array_equal(y, ort_run(model, {"x": x})["y"])
