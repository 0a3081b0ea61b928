"""Import of models already quantized in QDQ form (QuantizeLinear/DequantizeLinear pairs, as
onnxruntime.quantization.quantize_static(..., quant_format=QuantFormat.QDQ) writes them).

    import_qdq(graph, calibration_inputs=None, strict=True) -> quantized graph

`graph` is what `import_onnx` gives for the file (cleaned by `simplify` first, which keeps the
pairs: they never fold). The pairs are stripped into a float graph
plus the file's parameters: a QuantizeLinear(x) -> DequantizeLinear pair fixes x's scale; a
DequantizeLinear of an int8 constant gives int8 weights and their (per-channel) scales, one of
an int32 constant a bias. The same lowering as static quantization then builds the quantized
ops, with mult/shift derived from the file's scales.

The contract is symmetric int8 (zero point 0). onnxruntime writes that with
`activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
extra_options={"ActivationSymmetric": True, "WeightSymmetric": True}`; any other zero point or
type (its default uint8 activations among them) is a QuantizationError naming the node.

With symmetric activations onnxruntime keeps a Relu between two QDQ pairs (conv -> Q(s1) ->
DQ -> Relu -> Q(s2)) and rounds twice. `strict` (the default) keeps that: the Relu folds into
the convolution only where s1 == s2, otherwise it runs between Dequantize and Quantize as
onnxruntime runs it. `strict=False` folds it always (one rounding, at s2: the accelerator's
form, within one step of onnxruntime's result).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs import OPS
from compiler.graph.passes import simplify
from compiler.quant.calibrate import collect
from compiler.quant.errors import QuantizationError
from compiler.quant.lowering import QuantParams, lower
from compiler.quant.requant import QWeight


def import_qdq(
    graph: Graph, calibration_inputs: Iterable[Mapping[str, np.ndarray]] | None = None, strict: bool = True
) -> Graph:
    """The quantized graph of a QDQ model. With `calibration_inputs`, the accumulator bounds
    come from running the (dequantized) float graph on them, else from the data-free rule."""
    float_graph, params = strip_qdq(simplify(graph), strict)
    if calibration_inputs is not None:
        params = replace(params, calibration=collect(float_graph, calibration_inputs))
    return lower(float_graph, params)


def strip_qdq(graph: Graph, strict: bool = True) -> tuple[Graph, QuantParams]:
    """The float graph of a QDQ graph (weights dequantized) and the file's quantization parameters."""
    g = graph.copy()
    weights: dict[str, QWeight] = {}
    biases: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for node in [n for n in g.nodes if n.op == "DequantizeLinear" and g.const_data(n.inputs[0]) is not None]:
        _constant(g, node, weights, biases)
    scales: dict[str, float] = {}
    for node in [n for n in g.nodes if n.op == "QuantizeLinear"]:
        _pair(g, node, scales)
    g.remove_dead()
    for node in g.nodes:
        if node.op in ("QuantizeLinear", "DequantizeLinear"):
            raise QuantizationError(f"{_where(node)}: not part of a QuantizeLinear -> DequantizeLinear pair")
    return g, QuantParams(scales, weights, biases, strict=strict)


def _where(node: Node) -> str:
    return f"node {node.name} ({node.op})"


def _params(g: Graph, node: Node) -> tuple[np.ndarray, np.ndarray]:
    scale, zero = (g.const_data(i) for i in node.inputs[1:3])
    if scale is None or zero is None:
        raise QuantizationError(f"{_where(node)}: scale and zero point must be constants")
    if np.any(zero != 0):
        raise QuantizationError(
            f"{_where(node)}: zero point {zero.reshape(-1)[0]} ({zero.dtype}); only symmetric int8 is "
            "supported (quantize with activation_type=QInt8 and ActivationSymmetric=True)"
        )
    return scale.astype(np.float64).reshape(-1), zero


def _constant(
    g: Graph, node: Node, weights: dict[str, QWeight], biases: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    """A DequantizeLinear of a constant becomes the float constant it computes (and the record)."""
    data = g.const_data(node.inputs[0])
    assert data is not None
    scale, _ = _params(g, node)
    if data.dtype.name not in ("int8", "int32"):
        raise QuantizationError(
            f"{_where(node)}: {data.dtype} constants are not supported (int8 weights, int32 biases)"
        )
    params = [g.values[i].data for i in node.inputs[1:3]]
    (dequantized,) = OPS["DequantizeLinear"].evaluate(
        [data, *(p for p in params if p is not None)], node.attrs
    )
    out = node.outputs[0]
    g.nodes.remove(node)
    g.values[out] = const(out, dequantized)
    if data.dtype.name == "int8":
        weights[out] = QWeight(data, scale, node.int_attr("axis") if scale.size > 1 else 0)
    else:
        biases[out] = (data, scale)


def _pair(g: Graph, node: Node, scales: dict[str, float]) -> None:
    """QuantizeLinear(x) read only by DequantizeLinear nodes of the same scale: x gets that scale
    and the pairs disappear (their readers read x)."""
    x, q = node.inputs[0], node.outputs[0]
    scale, zero = _params(g, node)
    if scale.size != 1 or zero.dtype.name != "int8":
        raise QuantizationError(f"{_where(node)}: activations need one int8 scale per tensor")
    if x in scales and scales[x] != float(scale[0]):
        raise QuantizationError(f"{_where(node)}: {x} is quantized with two scales")
    users = g.consumers(q)
    if q in g.outputs or not users:
        raise QuantizationError(f"{_where(node)}: its int8 output {q} leaves the graph")
    for user in users:
        if user.op != "DequantizeLinear" or _params(g, user)[0].tolist() != scale.tolist():
            raise QuantizationError(
                f"{_where(node)}: read by {_where(user)}, not a DequantizeLinear of its scale"
            )
    name = x
    for user in sorted(users, key=lambda u: u.outputs[0] in g.outputs):  # graph outputs last
        out = user.outputs[0]
        if not g.bypass(user, name):
            raise QuantizationError(f"{_where(user)}: graph output {out} cannot take the name of {name}")
        if out in g.outputs:
            name = out  # bypass renamed x to the output's name
    scales[name] = float(scale[0])
