"""ONNX shape inference runs in a forked child: an abort inside onnx's C++ is a one-line
ModelImportError, a bug in our own code is still a traceback, and the types come back unchanged."""

from __future__ import annotations

import os

import onnx
import pytest
from onnx import TensorProto, helper

from compiler.errors import ModelImportError
from compiler.frontend import onnx_shapes


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Flatten", ["r"], ["y"], axis=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_the_child_gives_the_types_inference_derives() -> None:
    want = {"r": ((2, 3, 4), "float32"), "y": ((2, 12), "float32")}
    assert onnx_shapes.infer_types(_model(), "m.onnx") == want


def test_an_abort_inside_shape_inference_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: os.abort())
    with pytest.raises(ModelImportError, match=r"^m.onnx: ONNX shape inference crashed \(signal SIGABRT\); "
                                               r"the model is malformed$"):
        onnx_shapes.infer_types(_model(), "m.onnx")


def test_what_onnx_prints_as_it_aborts_is_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    def say_and_abort(*args: object, **kwargs: object) -> None:
        os.write(2, b"onnx/defs/shape_inference.h:42: Assertion `dim >= 0' failed.\nmore\n")
        os.abort()
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", say_and_abort)
    message = (r"^m.onnx: ONNX shape inference crashed \(signal SIGABRT: onnx/defs/shape_inference.h:42: "
               r"Assertion `dim >= 0' failed.\); the model is malformed$")
    with pytest.raises(ModelImportError, match=message):
        onnx_shapes.infer_types(_model(), "m.onnx")


def test_an_error_onnx_reports_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise onnx.shape_inference.InferenceError("[ShapeInferenceError] bad\nmore")
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    message = r"^m.onnx: ONNX shape inference failed: \[ShapeInferenceError\] bad$"
    with pytest.raises(ModelImportError, match=message):
        onnx_shapes.infer_types(_model(), "m.onnx")


def test_a_bug_in_the_child_is_not_taken_for_a_bad_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(vi: onnx.ValueInfoProto) -> None:
        raise KeyError("oops")
    monkeypatch.setattr(onnx_shapes, "_type_info", broken)
    with pytest.raises(RuntimeError, match=r"ONNX shape inference in the child: KeyError: 'oops'"):
        onnx_shapes.infer_types(_model(), "m.onnx")
