"""Import of models already quantized in QDQ form (QuantizeLinear/DequantizeLinear pairs, as
onnxruntime.quantization.quantize_static(..., quant_format=QuantFormat.QDQ) writes them).

    import_qdq(graph, calibration_inputs=None, strict=True) -> quantized graph

`graph` is what `import_onnx` gives for the file (cleaned by `simplify` first, which keeps the
pairs: they never fold). The pairs are stripped into a float graph
plus the file's parameters: a QuantizeLinear(x) -> DequantizeLinear pair fixes x's scale; a
DequantizeLinear of an int8 constant gives int8 weights and their (per-channel) scales, one of
an int32 constant a bias: a `Plan` (compiler.quant.plan) of one scale per activation. The same
rewrite as static quantization (compiler.quant.rewrite) then builds the quantized ops, with
mult/shift derived from the file's scales.

The contract is symmetric int8 (zero point 0). onnxruntime writes that with
`activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
extra_options={"ActivationSymmetric": True, "WeightSymmetric": True}`; any other zero point or
type (its default uint8 activations among them) is a QuantizationError naming the node.

With symmetric activations onnxruntime keeps a Relu between two QDQ pairs (conv -> Q(s1) ->
DQ -> Relu -> Q(s2)) and rounds twice. `strict` (the default) keeps that: the Relu folds into
the convolution only where s1 == s2, otherwise it runs between Dequantize and Quantize as
onnxruntime runs it. `strict=False` folds it always (one rounding, at s2: the accelerator's
form, within one step of onnxruntime's result).

Without calibration inputs every QConv/QGemm whose weights come from the file takes the
contract's precise requantization (`precise=True`, see `precise_requant`): its multipliers keep
~31 bits instead of the 6-10 that the data-free accumulator bound leaves, which is what brings
the outputs within one step of onnxruntime's; every QAdd likewise gets int32 multipliers (about
23 bits, vector operands on the accelerator) instead of 16-bit immediates. With calibration
inputs and `precise` not given, the bounds are measured and the plain requantization is kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs import OPS
from compiler.graph.opdefs.qops import INT32_MAX
from compiler.graph.passes import simplify
from compiler.graph.verify import verify
from compiler.quant.calibrate import collect
from compiler.quant.errors import QuantizationError
from compiler.quant.plan import Plan, codings
from compiler.quant.requant import (
    ACT_MAX,
    PreciseRequant,
    QWeight,
    immediate_requant,
    precise_requant,
)
from compiler.quant.rewrite import rewrite


def import_qdq(
    graph: Graph,
    calibration_inputs: Iterable[Mapping[str, np.ndarray]] | None = None,
    strict: bool = True,
    precise: bool | None = None,
) -> Graph:
    """The quantized graph of a QDQ model. With `calibration_inputs`, the accumulator bounds
    come from running the (dequantized) float graph on them, else from the data-free rule.
    `precise` (default: without calibration inputs) gives QConv/QGemm the precise
    requantization (see the module doc)."""
    float_graph, plan = strip_qdq(simplify(graph), strict)
    if calibration_inputs is not None:
        plan = replace(plan, calibration=collect(float_graph, calibration_inputs))
    quantized = rewrite(float_graph, plan)
    if precise if precise is not None else calibration_inputs is None:
        quantized = precise_requantization(quantized, plan)
    return quantized


_PLAIN_INT8 = ("MaxPool", "Relu", "Flatten", "Reshape")  # int8 in, int8 out at the input's scale


def int8_scales(graph: Graph) -> dict[str, float]:
    """The scale of every int8 activation of a quantized graph (one per tensor), by value name."""
    scales: dict[str, float] = {}
    for node in graph.nodes:
        out = node.outputs[0]
        if node.op == "Quantize":
            scales[out] = node.float_attr("scale")
        elif "out_scale" in node.attrs:
            scales[out] = node.float_attr("out_scale")
        elif node.op in _PLAIN_INT8 and node.inputs[0] in scales:
            scales[out] = scales[node.inputs[0]]
    return scales


def precise_requantization(graph: Graph, plan: Plan) -> Graph:
    """`graph` with every QConv/QGemm whose weights the file fixed switched to the precise
    requantization, its ratios in_scale * w_scale[k] / out_scale recomputed from the file's
    scales exactly as the rewrite computed them (a node whose multipliers do not match, or
    whose ratios have no precise form, keeps its requantization)."""
    g = graph.copy()
    scales = int8_scales(g)
    for node in [n for n in g.nodes if n.op == "QAdd"]:
        g.replace_node(node, [_wide_add(node, scales)])
    for node in [n for n in g.nodes if n.op in ("QConv", "QGemm") and len(n.inputs) == 4]:
        chosen = _precise_params(g, node, scales, plan)
        if chosen is None:
            continue
        names = [g.fresh_name(f"{node.name}.{what}") for what in ("pmult", "clamp_lo", "clamp_hi")]
        for name, data in zip(names, (chosen.mult, chosen.clamp_lo, chosen.clamp_hi), strict=True):
            g.add_value(const(name, data))
        attrs = {**node.attrs, "shift": chosen.shift, "split": chosen.split}
        new = Node(node.op, (*node.inputs[:3], *names), node.outputs, attrs, node.name)
        g.replace_node(node, [new])
    return verify(g.remove_dead())


def _wide_add(node: Node, scales: Mapping[str, float]) -> Node:
    """A QAdd with int32 multipliers (23 bits or so instead of 16), its ratios s_a / s_out and
    s_b / s_out recomputed from the file's scales; the node as it is when they do not reproduce
    its multipliers."""
    s_a, s_b = scales.get(node.inputs[0]), scales.get(node.inputs[1])
    if s_a is None or s_b is None:
        return node
    reals = np.array([s_a, s_b]) / node.float_attr("out_scale")
    have = [node.int_attr("mult_a"), node.int_attr("mult_b")]
    if have != list(immediate_requant(reals, ACT_MAX, _where(node))[0]):
        return node  # not the ratios the rewrite used
    (mult_a, mult_b), shift = immediate_requant(reals, ACT_MAX, _where(node), limit=INT32_MAX)
    return replace(node, attrs={**node.attrs, "mult_a": mult_a, "mult_b": mult_b, "shift": shift})


def _precise_params(
    g: Graph, node: Node, scales: Mapping[str, float], plan: Plan
) -> PreciseRequant | None:
    s_in = scales.get(node.inputs[0])
    match = re.fullmatch(r"(.*)\.q(\.\d+)?", node.inputs[1])
    qw = plan.weights.get(match.group(1)) if match else None
    mult = g.const_data(node.inputs[3])
    if s_in is None or qw is None or mult is None:
        return None
    reals = s_in * qw.channel_scales(mult.size) / node.float_attr("out_scale")
    if not np.array_equal(np.rint(reals * float(1 << node.int_attr("shift"))), mult.astype(np.float64)):
        return None  # not the ratios the rewrite used
    clip = (node.int_attr("clip_lo"), node.int_attr("clip_hi"))
    try:
        return precise_requant(reals, clip, _where(node))
    except QuantizationError:
        return None


def strip_qdq(graph: Graph, strict: bool = True) -> tuple[Graph, Plan]:
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
    return g, Plan(codings(scales), weights, biases, strict=strict)


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
