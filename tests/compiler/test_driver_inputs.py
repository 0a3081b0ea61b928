"""compiler.driver's refusals of inputs it cannot quantize."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import quantize_graph
from compiler.frontend import import_onnx
from hw.errors import InputError


def test_a_zero_sized_input_is_refused_before_quantization() -> None:
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_onnx(model.SerializeToString())  # an empty tensor is legal ONNX
    with pytest.raises(InputError, match=r"^m\.onnx: input 'x' has shape \[0, 4\]; quantization needs inputs "
                       r"with data \(no zero-sized dimension\)$"):
        quantize_graph(imported, [{"x": np.zeros((0, 4), np.float32)}], where="m.onnx")
