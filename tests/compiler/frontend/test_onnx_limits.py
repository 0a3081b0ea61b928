"""The frontend's refusals of hostile files: external data outside the model's directory,
non-finite weights, tensors over the size limit, files that are not regular or too large.
Each message is matched exactly where it names the offender."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelImportError
from compiler.frontend import import_onnx, onnx_load
from compiler.frontend.onnx_shapes import MAX_TENSOR_ELEMENTS


def _model(weight: np.ndarray | None = None, x_shape: tuple[int, ...] = (1, 4),
           nodes: list[onnx.NodeProto] | None = None) -> onnx.ModelProto:
    """y = x @ w, w a 4x2 initializer (or `weight`)."""
    w = numpy_helper.from_array(np.ones((4, 2), np.float32) if weight is None else weight, "w")
    nodes = nodes or [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _external(model: onnx.ModelProto, location: str) -> onnx.ModelProto:
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    return model


@pytest.mark.parametrize("location", ["/etc/passwd", "../weights.bin", "a/../../weights.bin", ""])
def test_external_data_outside_the_directory_is_refused(tmp_path: Path, location: str) -> None:
    (tmp_path / "weights.bin").write_bytes(bytes(32))
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "model.onnx"
    path.write_bytes(_external(_model(), location).SerializeToString())
    with pytest.raises(ModelImportError, match=rf"model\.onnx: initializer 'w' stores its data at "
                       rf"'{location}'; external data must be a relative path inside the model's directory$"):
        import_onnx(path)


def test_missing_external_data_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(_external(_model(), "missing.bin").SerializeToString())
    with pytest.raises(ModelImportError,
                       match=r"model\.onnx: cannot load external weights \(.*missing\.bin") as e:
        import_onnx(path)
    assert "\n" not in str(e.value)


def test_external_data_beside_the_model_loads(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(np.full((4, 2), 2, np.float32).tobytes())
    path = tmp_path / "model.onnx"
    path.write_bytes(_external(_model(), "w.bin").SerializeToString())
    data = import_onnx(path).values["w"].data
    assert data is not None and np.array_equal(data, np.full((4, 2), 2, np.float32))


def test_external_data_of_a_model_given_as_bytes_is_refused() -> None:
    with pytest.raises(ModelImportError, match=r"^<bytes>: initializer 'w' stores its data in the external "
                       r"file 'w\.bin'; import the model from its path$"):
        import_onnx(_external(_model(), "w.bin").SerializeToString())


@pytest.mark.parametrize(("value", "kind"), [(np.nan, "NaN"), (np.inf, "infinite"), (-np.inf, "infinite")])
def test_non_finite_weights_are_refused(value: float, kind: str) -> None:
    weight = np.ones((4, 2), np.float32)
    weight[1, 1] = value
    with pytest.raises(ModelImportError, match=rf"^<bytes>: initializer 'w' holds {kind} values "
                       r"\(weights must be finite\)$"):
        import_onnx(_model(weight).SerializeToString())


def test_a_nan_constant_is_refused() -> None:
    c = helper.make_node("Constant", [], ["c"], name="const",
                         value=numpy_helper.from_array(np.array([1.0, np.nan], np.float32)))
    mm = helper.make_node("MatMul", ["x", "w"], ["m"], name="mm")
    add = helper.make_node("Add", ["m", "c"], ["y"], name="add")
    with pytest.raises(ModelImportError,
                       match=r"^<bytes>: node 'const' \(Constant, opset 17\) holds NaN values"):
        import_onnx(_model(nodes=[c, mm, add]).SerializeToString())


def test_an_infinite_scalar_is_a_bound_and_kept() -> None:
    c = helper.make_node("Constant", [], ["hi"], value=numpy_helper.from_array(np.array(np.inf, np.float32)))
    lo = helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(0, np.float32)))
    mm = helper.make_node("MatMul", ["x", "w"], ["m"], name="mm")
    clip = helper.make_node("Clip", ["m", "lo", "hi"], ["y"], name="clip")
    graph = import_onnx(_model(nodes=[c, lo, mm, clip]).SerializeToString())
    assert graph.outputs == ["y"]


def test_an_input_over_the_tensor_limit_is_refused() -> None:
    with pytest.raises(ModelImportError, match=rf"^<bytes>: input 'x' has {(1 << 40) * 4} elements "
                       rf"\(1099511627776x4\), more than the limit of {MAX_TENSOR_ELEMENTS}$"):
        import_onnx(_model(x_shape=(1 << 40, 4)).SerializeToString())


def test_a_computed_tensor_over_the_limit_is_refused() -> None:
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 10], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"], name="fill"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    model = _model(nodes=nodes)
    model.graph.initializer.append(shape)
    model.graph.output.append(helper.make_tensor_value_info("big", TensorProto.FLOAT, None))
    with pytest.raises(ModelImportError, match=r"^<bytes>: node 'fill' \(ConstantOfShape, opset 17\): output "
                       rf"'big' has {1 << 30} elements \(1048576x1024\), more than the limit of"):
        import_onnx(model.SerializeToString())


def test_a_device_file_is_refused_before_reading() -> None:
    with pytest.raises(ModelImportError, match=r"^/dev/zero: is not a regular file, not an ONNX file$"):
        import_onnx("/dev/zero")


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(_model().SerializeToString())
    monkeypatch.setattr(onnx_load, "MAX_MODEL_BYTES", 16)
    with pytest.raises(ModelImportError, match=rf"model\.onnx: {path.stat().st_size} bytes, more than the "
                       r"limit of 16 for an ONNX model$"):
        import_onnx(path)


def test_a_constant_gather_index_out_of_range_is_refused() -> None:
    idx = numpy_helper.from_array(np.array([0, 5], np.int64), "idx")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Gather", ["m", "idx"], ["y"], name="pick", axis=1)]
    model = _model(nodes=nodes)
    model.graph.initializer.append(idx)
    with pytest.raises(ModelImportError, match=r"^<bytes>: node 'pick' \(Gather, opset 17\): "
                       r"index 5 is out of range for axis 1 of size 2$"):
        import_onnx(model.SerializeToString())


def test_reading_an_unconverted_second_output_is_refused() -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m", "m2"], name="mm"),
             helper.make_node("Add", ["m", "m2"], ["y"], name="add")]
    with pytest.raises(ModelImportError, match=r"^<bytes>: node 'add' \(Add, opset 17\): input 1 \('m2'\) "
                       r"is an output this importer does not produce "
                       r"\(only the first output of its node is converted\)$"):
        import_onnx(_model(nodes=nodes).SerializeToString())


def test_a_negative_initializer_dim_is_refused_before_shape_inference() -> None:
    model = _model()
    model.graph.initializer[0].dims[1] = -7  # ONNX's C++ shape inference aborts on some of these
    with pytest.raises(ModelImportError, match=r"^<bytes>: initializer 'w' has negative dimension -7 "
                       r"\(dims \[4, -7\]\)$"):
        import_onnx(model.SerializeToString())


def test_a_negative_constant_dim_is_refused() -> None:
    c = helper.make_node("Constant", [], ["c"], name="const",
                         value=numpy_helper.from_array(np.zeros(2, np.float32)))
    c.attribute[0].t.dims[0] = -2
    nodes = [c, helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "c"], ["y"], name="add")]
    with pytest.raises(ModelImportError, match=r"^<bytes>: node 'const' \(Constant\) attribute 'value' has "
                       r"negative dimension -2 \(dims \[-2\]\)$"):
        import_onnx(_model(nodes=nodes).SerializeToString())


def test_an_initializer_over_the_tensor_limit_is_refused_before_reading() -> None:
    model = _model()
    model.graph.initializer[0].dims[:] = [1 << 20, 1 << 9]
    with pytest.raises(ModelImportError, match=rf"^<bytes>: initializer 'w' has {1 << 29} elements "
                       rf"\(1048576x512\), more than the limit of {MAX_TENSOR_ELEMENTS}$"):
        import_onnx(model.SerializeToString())


@pytest.mark.parametrize(("index", "values", "what", "bounds"), [
    (2, [1.0, 3e38, 2.0, 2.0], "scales", "above 0.0 and at most 1024"),
    (2, [1.0, -2.0, 2.0, 2.0], "scales", "above 0.0 and at most 1024"),
    (3, [1, 4, -3, 8], "sizes", f"above 0 and at most {MAX_TENSOR_ELEMENTS}"),
])
def test_resize_constants_that_would_abort_shape_inference_are_refused(
        index: int, values: list[float], what: str, bounds: str) -> None:
    # each of these makes a negative dimension in ONNX's shape inference, whose C++ then aborts
    dtype = np.float32 if what == "scales" else np.int64
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    inputs = ["x", "", "", ""]
    inputs[index] = "k"
    nodes = [helper.make_node("Resize", inputs[: index + 1], ["r"], name="up", mode="nearest"),
             helper.make_node("Slice", ["r", "s", "e"], ["y"], name="cut")]
    inits = [numpy_helper.from_array(np.array(values, dtype), "k"),
             numpy_helper.from_array(np.array([0], np.int64), "s"),
             numpy_helper.from_array(np.array([2], np.int64), "e")]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    shown = re.escape(str(np.array(values, dtype).tolist()))
    with pytest.raises(ModelImportError, match=rf"^<bytes>: node 'up' \(Resize\) {what} {shown} must each be "
                       rf"{bounds}$"):
        import_onnx(model.SerializeToString())
