"""Every ModelImportError the frontend raises, each matched by its message; and damaged files
never escape as anything but ModelImportError."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler.errors import ModelImportError
from compiler.frontend import import_onnx
from compiler.frontend.onnx_load import MAX_OPSET
from tests.compiler.frontend.onnx_models import Builder
from tests.compiler.frontend.test_converter_patterns import SHAPES, pytorch_legacy_cnn


def _relu_model(
    shape: list[int | str] | None = None, opset: int = 13, dtype: int = TensorProto.FLOAT
) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", dtype, [2, 3] if shape is None else shape)
    y = helper.make_tensor_value_info("y", dtype, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="act")], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _fails(source: object, match: str, shapes: dict[str, tuple[int, ...]] | None = None) -> str:
    with pytest.raises(ModelImportError, match=match) as info:
        import_onnx(source, shapes)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


# -- the file ---------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    _fails(tmp_path / "nope.onnx", r"nope\.onnx: no such file$")


def test_directory(tmp_path: Path) -> None:
    _fails(tmp_path, r"is a directory, not an ONNX file$")


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.onnx").write_bytes(b"")
    _fails(tmp_path / "empty.onnx", r"empty\.onnx: empty file, not an ONNX model$")


@pytest.mark.parametrize(
    "data",
    [b"hello, this is a text file\n", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b'{"graph": []}'],
    ids=["text", "png", "json"],
)
def test_not_onnx(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "x.onnx").write_bytes(data)
    _fails(tmp_path / "x.onnx", r"x\.onnx: not an ONNX model \(not a serialized ModelProto\)$")


def test_truncated_file(tmp_path: Path) -> None:
    data = pytorch_legacy_cnn(13).SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    _fails(
        tmp_path / "cut.onnx",
        rf"cut\.onnx: truncated ONNX model \({len(data) // 2} bytes; the file was cut short\)$",
    )


def test_every_cut_is_reported_as_truncated() -> None:
    data = pytorch_legacy_cnn(13).SerializeToString()
    for cut in range(1, len(data), 97):
        _fails(
            data[:cut],
            r"^<bytes>: truncated (ONNX model|or incomplete ONNX model \(no (graph|opset_import)\))",
        )


def test_corrupted_inside_a_well_framed_file() -> None:
    graph_field = b"\x0f\x00\x00\x00"  # field 1 with wire type 7, which does not exist
    data = b"\x08\x08" + b"\x3a" + bytes([len(graph_field)]) + graph_field
    _fails(data, r"^<bytes>: corrupted ONNX model \(protobuf parse failed\)$")


def test_damaged_files_raise_only_model_import_errors() -> None:
    data = pytorch_legacy_cnn(13).SerializeToString()
    rng = np.random.default_rng(0)
    for _ in range(150):
        damaged = bytearray(data)
        for pos in rng.integers(0, len(data), size=3):
            damaged[pos] = int(rng.integers(0, 256))
        try:
            import_onnx(bytes(damaged), SHAPES)
        except ModelImportError as e:
            assert "\n" not in str(e)


# -- opsets and operators ---------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [7, 8, MAX_OPSET + 1])
def test_unsupported_opset(opset: int) -> None:
    _fails(
        _relu_model(opset=opset),
        rf"^<model>: opset {opset} is not supported \(supported: 9 to {MAX_OPSET}\)$",
    )


def test_no_default_opset() -> None:
    model = _relu_model()
    model.opset_import[0].domain = "com.example"
    _fails(model, r"^<model>: the model imports no ai.onnx opset$")


def test_unsupported_operator() -> None:
    b = Builder(13)
    y = b.op("GridSample", [b.op("Relu", ["x"]), b.floats(np.zeros((1, 2, 2, 2)))], "y")
    b.op("LSTM", [y], "z")
    _fails(
        b.model({"x": [1, 1, 2, 2]}, [y]),
        r"^<model>: unsupported operator GridSample \(node 'GridSample_y', opset 13; "
        r"1 more unsupported node\)$",
    )


def test_unsupported_domain_operator() -> None:
    model = _relu_model()
    model.graph.node.append(helper.make_node("FusedConv", ["y"], ["z"], domain="com.microsoft"))
    _fails(model, r"^<model>: unsupported operator com\.microsoft\.FusedConv \(node 'z', opset 13\)$")


# -- shapes -----------------------------------------------------------------------------------------


def test_symbolic_dimension() -> None:
    message = _fails(_relu_model(["batch", 3, 224, 224]), r"input 'x' dimension 0 \('batch'\) is symbolic")
    assert "pass --input-shape x=1,3,224,224" in message


def test_unnamed_unknown_dimension() -> None:
    model = _relu_model([2, 3])
    model.graph.input[0].type.tensor_type.shape.dim[1].Clear()
    _fails(model, r"input 'x' dimension 1 \('\?'\) is symbolic; pass --input-shape x=2,1 ")


def test_input_without_shape() -> None:
    model = _relu_model()
    model.graph.input[0].type.tensor_type.ClearField("shape")
    _fails(
        model,
        r"^<model>: input 'x' has no shape in the model; "
        r"pass --input-shape x=1,3,224,224 with its real dimensions$",
    )


def test_symbolic_dimension_bound_by_input_shapes() -> None:
    graph = import_onnx(_relu_model(["batch", 3]), {"x": (5, 3)})
    assert graph.values["y"].shape == (5, 3)


@pytest.mark.parametrize(
    "shapes,match",
    [
        ({"y": (1, 3)}, r"^<model>: input_shapes names unknown input 'y' \(model inputs: x\)$"),
        (
            {"x": (1, 3, 1)},
            r"^<model>: input_shapes\['x'\] has rank 3 but input 'x' has rank 2 in the model$",
        ),
        ({"x": (4, 4)}, r"^<model>: input_shapes\['x'\] dimension 1 is 4 but the model fixes it to 3$"),
        ({"x": (0, 3)}, r"^<model>: input_shapes\['x'\] = \(0, 3\) must be positive integers$"),
    ],
    ids=["unknown", "rank", "fixed-dim", "zero"],
)
def test_bad_input_shapes(shapes: dict[str, tuple[int, ...]], match: str) -> None:
    _fails(_relu_model(["n", 3]), match, shapes)


def test_parameter_not_computable() -> None:
    b = Builder(13)
    y = b.op("Reshape", ["x", "s"], "y")
    model = b.model({"x": [2, 3], "s": [2]}, [y], types={"s": TensorProto.INT64})
    _fails(
        model,
        r"node 'Reshape_y' \(Reshape, opset 13\): shape \(input 's'\) is not a constant "
        r"and cannot be computed from static shapes$",
    )


def test_impossible_reshape() -> None:
    b = Builder(13)
    _fails(
        b.model({"x": [2, 3]}, [b.op("Reshape", ["x", b.ints([4, -1])], "y")]),
        r"\(Reshape, opset 13\): cannot reshape \(2, 3\) to \(4, -1\)",
    )


def test_broadcast_mismatch() -> None:
    b = Builder(13)
    y = b.op("Add", ["x", b.weight("w", [4, 3])], "y")
    _fails(
        b.model({"x": [2, 3]}, [y]),
        r"node 'Add_y' \(Add, opset 13\): shapes \(2, 3\), \(4, 3\) do not broadcast$",
    )


# -- what inference models must not have ------------------------------------------------------------


def test_training_batch_norm() -> None:
    b = Builder(15)
    params = [b.weight(n, [3]) for n in "sbmv"]
    y = b.op("BatchNormalization", ["x", *params], "y", training_mode=1)
    _fails(
        b.model({"x": [2, 3, 4]}, [y]),
        r"training_mode=1 is not supported \(export the model in inference mode\)$",
    )


@pytest.mark.parametrize("op", ["Dropout", "MaxPool"])
def test_used_second_output(op: str) -> None:
    b = Builder(13)
    attrs = {"kernel_shape": [2]} if op == "MaxPool" else {}
    y = b.op(op, ["x"], "y", n_out=2, **attrs)
    z = b.op("Cast", ["y_extra1"], "z", to=TensorProto.FLOAT)
    message = _fails(b.model({"x": [1, 2, 4]}, [y, z]), rf"only the first output of {op} is supported$")
    assert re.search(rf"node '{op}_y' \({op}, opset 13\): output 'y_extra1' is used", message)


def test_blocked_quantization() -> None:
    b = Builder(21)
    y = b.op(
        "QuantizeLinear",
        ["x", b.floats(np.ones((2, 1))), b.init("z", np.zeros((2, 1), np.int8))],
        "y",
        axis=1,
        block_size=2,
    )
    _fails(
        b.model({"x": [2, 2]}, [y], types={"y": TensorProto.INT8}),
        r"blocked quantization \(block_size\) is not supported$",
    )


def test_unsupported_element_type() -> None:
    _fails(
        _relu_model(dtype=TensorProto.STRING),
        r"^<model>: input 'x' has element type STRING, which is not supported$",
    )


def test_unsupported_initializer_type() -> None:
    model = _relu_model()
    model.graph.initializer.append(helper.make_tensor("w", TensorProto.BFLOAT16, [1], [1.0]))
    _fails(model, r"initializer 'w' has element type BFLOAT16, which is not supported$")


def test_input_nothing_defines() -> None:
    model = _relu_model()
    model.graph.node[0].input[0] = "ghost"
    _fails(model, r"^<model>: node 'act' \(Relu\) reads 'ghost', which nothing defines \(or a cycle\)$")


def test_cycle() -> None:
    model = _relu_model()
    model.graph.node.append(helper.make_node("Add", ["y", "z"], ["z"], name="loop"))
    _fails(model, r"node 'loop' \(Add\) reads 'z', which nothing defines \(or a cycle\)$")


def test_output_nothing_produces() -> None:
    model = _relu_model()
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3]))
    _fails(model, r"^<model>: graph output 'z' is not produced by any node$")


def test_constant_of_an_unsupported_kind() -> None:
    model = _relu_model()
    model.graph.node.insert(0, helper.make_node("Constant", [], ["s"], value_string=b"hi"))
    model.graph.node[1].input.append("s")
    _fails(
        model,
        r"\(Constant, opset 13\): only tensor and numeric constants are supported, not \['value_string'\]$",
    )
