"""QDQ import: models quantized by onnxruntime.quantization agree with onnxruntime's own int8
execution of the same file; the file's integers are used as they are; what the symmetric int8
contract cannot represent is refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler.frontend import import_onnx
from compiler.graph import Graph, const
from compiler.graph.builder import append
from compiler.quant import QuantizationError
from compiler.quant.accuracy import graph_outputs, ort_outputs, ort_session, output_step, step_agreement
from compiler.quant.check import wrap_margins
from compiler.quant.qdq import import_qdq, strip_qdq
from tests.compiler.quant.ort_models import quantize_qdq, small_resnet


def _inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def qdq_model(tmp_path_factory: pytest.TempPathFactory) -> onnx.ModelProto:
    return quantize_qdq(small_resnet(), _inputs(8, seed=1), tmp_path_factory.mktemp("qdq"))


def test_small_resnet_agrees_with_onnxruntime_int8(qdq_model: onnx.ModelProto) -> None:
    q = import_qdq(import_onnx(qdq_model))
    assert [n.op for n in q.nodes] == [
        *("Quantize", "QConv", "QConv", "QAdd", "MaxPool"),
        *("QGlobalAvgPool", "Flatten", "QGemm", "Dequantize"),
    ]
    xs = _inputs(20, seed=2)
    result = step_agreement(ort_outputs(ort_session(qdq_model), xs), graph_outputs(q, xs), output_step(q))
    assert result.cosine_min >= 0.9999 and result.within_one_step == 1.0 and result.exact >= 0.98


def test_precise_requantization_never_comes_near_a_wrap(qdq_model: onnx.ModelProto) -> None:
    """The clamp bounds every 32-bit step of the two-part multiply, whatever the input: inputs
    ten times larger than calibration's leave the margins below 1 (the unclamped product would
    not be)."""
    q = import_qdq(import_onnx(qdq_model))
    precise = [n.name for n in q.nodes if n.op in ("QConv", "QGemm") and n.int_attr("split") > 0]
    assert precise
    margins = wrap_margins(q, [{"x": 10 * x["x"]} for x in _inputs(3, seed=4)])
    assert all(0 < margins[name] < 1 for name in precise), margins


def test_the_files_integers_are_used_as_they_are(qdq_model: onnx.ModelProto) -> None:
    inits = {i.name: numpy_helper.to_array(i) for i in qdq_model.graph.initializer}
    q = import_qdq(import_onnx(qdq_model))
    conv = next(n for n in q.nodes if n.op == "QConv")
    file_weight = next(a for name, a in inits.items() if a.dtype == np.int8 and a.shape == (8, 3, 3, 3))
    file_bias = next(a for name, a in inits.items() if a.dtype == np.int32 and name.startswith("b1"))
    np.testing.assert_array_equal(q.const_data(conv.inputs[1]), file_weight)
    np.testing.assert_array_equal(q.const_data(conv.inputs[2]), file_bias)
    scales = {name: float(a) for name, a in inits.items() if name.endswith("_scale") and a.size == 1}
    assert conv.float_attr("out_scale") == pytest.approx(scales["r1_scale"], rel=1e-7)


def _rescale(model: onnx.ModelProto, name: str, factor: float) -> onnx.ModelProto:
    """The model with one activation scale initializer multiplied by `factor`."""
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    for init in edited.graph.initializer:
        if init.name == name:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(factor), name))
    return edited


def test_strict_import_keeps_a_requantizing_relu_as_onnxruntime_computes_it(
    qdq_model: onnx.ModelProto,
) -> None:
    # conv -> Q(s1) -> DQ -> Relu -> Q(s2) with s2 != s1: onnxruntime rounds twice
    model = _rescale(qdq_model, "r1_scale", 1.37)
    strict = import_qdq(import_onnx(model))
    ops = [n.op for n in strict.nodes]
    assert ops[:5] == ["Quantize", "QConv", "Dequantize", "Relu", "Quantize"]
    loose = import_qdq(import_onnx(model), strict=False)
    assert [n.op for n in loose.nodes][:3] == ["Quantize", "QConv", "QConv"]  # the ReLU folded, one rounding
    xs = _inputs(20, seed=3)
    expected, step = ort_outputs(ort_session(model), xs), output_step(strict)
    exact = step_agreement(expected, graph_outputs(strict, xs), step)
    assert exact.within_one_step == 1.0 and exact.exact >= 0.98
    folded = step_agreement(expected, graph_outputs(loose, xs), step)
    assert folded.cosine_min >= 0.999 and folded.within_one_step >= 0.99


def test_default_onnxruntime_options_are_refused_by_name(tmp_path: Path) -> None:
    # uint8 activations with zero points: outside the symmetric int8 contract
    model = quantize_qdq(
        small_resnet(), _inputs(4, seed=1), tmp_path, extra_options={}, activation_int8=False
    )
    with pytest.raises(
        QuantizationError, match=r"zero point \d+ \(uint8\); only symmetric int8 is supported"
    ):
        import_qdq(import_onnx(model))


def _pair_graph(dq_scale: float, reader: str) -> Graph:
    g = Graph()
    g.add_input("x", (1, 4), "float32")
    g.add_value(const("s", np.array(0.5, np.float32)))
    g.add_value(const("s2", np.array(dq_scale, np.float32)))
    g.add_value(const("z", np.array(0, np.int8)))
    append(g, "Relu", ["x"], ["r"])
    append(g, "QuantizeLinear", ["r", "s", "z"], ["q"])
    if reader == "dq":
        append(g, "DequantizeLinear", ["q", "s2", "z"], ["y"])
    else:
        append(g, "Cast", ["q"], ["y"], {"to": "float32"})
    g.outputs = ["y"]
    return g


@pytest.mark.parametrize(
    "dq_scale,reader,match",
    [
        (
            0.25,
            "dq",
            r"^node q \(QuantizeLinear\): read by node y \(DequantizeLinear\), not a DequantizeLinear of its "
            r"scale$",
        ),
        (
            0.5,
            "cast",
            r"^node q \(QuantizeLinear\): read by node y \(Cast\), not a DequantizeLinear of its scale$",
        ),
    ],
    ids=["other-scale", "not-dequantized"],
)
def test_pairs_that_are_not_plain_pairs_are_refused(dq_scale: float, reader: str, match: str) -> None:
    with pytest.raises(QuantizationError, match=match):
        strip_qdq(_pair_graph(dq_scale, reader))


def test_a_pair_at_the_output_moves_its_scale_to_the_output_name() -> None:
    g, plan = strip_qdq(_pair_graph(0.5, "dq"))
    assert [(n.op, n.inputs, n.outputs) for n in g.nodes] == [("Relu", ("x",), ("y",))]
    assert {k: c.scale for k, c in plan.codings.items()} == {"y": 0.5} and g.outputs == ["y"]


def test_without_calibration_convolutions_requantize_precisely(qdq_model: onnx.ModelProto) -> None:
    q = import_qdq(import_onnx(qdq_model))
    dense = [n for n in q.nodes if n.op in ("QConv", "QGemm")]
    assert [(n.int_attr("shift"), len(n.inputs)) for n in dense] == [(31, 6)] * 3
    assert all(11 <= n.int_attr("split") <= 20 for n in dense)
    plain = import_qdq(import_onnx(qdq_model), precise=False)
    assert all("split" not in n.attrs or n.int_attr("split") == 0
               for n in plain.nodes if n.op in ("QConv", "QGemm"))
