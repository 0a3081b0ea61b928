"""CompiledModel: partitioning and execution; host steps run native kernels, outputs equal the
graph interpreter's."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from compiler.frontend import import_onnx
from compiler.graph.interp import run_graph
from compiler.runtime.model import CompiledModel
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from sim.backends import make_backend


def _float_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Softmax", ["f"], ["y"], axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 9])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    graph = helper.make_graph(nodes, "host_only", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_host_steps_run_native_kernels_and_match_the_interpreter():
    graph = import_onnx(_float_model())
    cfg = PRESETS["tiny"]
    model = CompiledModel.compile(graph, AcceleratorTarget(cfg))
    assert [(s.node.op, s.where) for s in model.steps] == [
        ("MaxPool", "host"), ("GlobalAveragePool", "host"), ("Flatten", "view"), ("Softmax", "host")]
    x = np.random.default_rng(0).standard_normal((1, 8, 9, 9)).astype(np.float32)
    result = model.run({"x": x}, make_backend("fsim", cfg))
    want = run_graph(graph, {"x": x})["y"]
    np.testing.assert_allclose(result.outputs["y"], want, rtol=1e-5, atol=1e-6)
    assert [r.where for r in result.steps] == ["host", "host", "view", "host"]
    assert result.cycles == 0 and model.offloaded_macs_fraction() == 0.0
