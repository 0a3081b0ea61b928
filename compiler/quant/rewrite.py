"""Float graph + quantization plan -> quantized graph (the quantized-graph contract of
compiler.graph.opdefs.qops), fusing as it goes.

    rewrite(graph, plan) -> quantized graph (verified)

Each activation's coding (one scale, per-channel scales, a stream's factor, zero point -128, or
float) comes from the plan's `Coding` records (compiler.quant.plan, whose module doc says how the
ops carry them); this module only builds the ops. Fusions: Conv (+ bias) and dense layers
(canonical Gemm, or MatMul by a constant [K, N] plus an Add of a constant bias; inputs of rank > 2
are flattened to [M, K] around the QGemm) become QConv/QGemm with their requantization; a Relu or
Clip that is the only user of such a result, of a residual Add, folds into the op's clip bounds
(clip(round(y / s)) is exact for any bounds, rounding being monotone). Add of two activations of
one shape becomes QAdd; GlobalAveragePool (and ReduceMean over H, W) QGlobalAvgPool. MaxPool,
Relu, Flatten and Reshape of an int8 value stay int8 with the input's scale. Every other op runs
in float: Dequantize and Quantize nodes are inserted where a value changes representation, once
per value. With `Plan.strict` (a QDQ file) a fold or an int8 MaxPool/Relu/Flatten/Reshape needs
the scales to match, as the plan's module doc says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.graph.builder import append
from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs.qops import INT8_MAX, INT8_MIN
from compiler.graph.verify import verify
from compiler.quant.bias import BiasTarget, correct_biases
from compiler.quant.calibrate import channel_axis
from compiler.quant.errors import QuantizationError
from compiler.quant.plan import UNSIGNED_OFFSET, Coding, Plan, lowers_to_qconv
from compiler.quant.requant import (
    ACT_MAX,
    QWeight,
    accumulator_bounds,
    channel_requant,
    immediate_requant,
    int32_bias,
    quantize_bias,
    quantize_weight,
)


def rewrite(graph: Graph, plan: Plan) -> Graph:
    """The quantized graph of float `graph` coded as `plan` says (verified); inputs and outputs keep
    their names and types."""
    return _Rewrite(graph, plan).run()


@dataclass(frozen=True)
class _Act:
    """An activation folded into the op before it: its node and bounds (float units)."""

    node: Node
    lo: float
    hi: float


class _Rewrite:
    """One rewrite of `src` by `plan`: the new graph `g` as it grows, where each source value
    is as float (`floats`) and as int8 with the scale it was emitted at (`ints`), and the nodes
    already folded into an op before them (`absorbed`)."""

    def __init__(self, src: Graph, plan: Plan) -> None:
        self.src, self.plan = src, plan
        self.g = Graph(src.name)
        for name in src.inputs:
            v = src.values[name]
            self.g.add_input(name, v.shape, v.dtype)
        self.floats: dict[str, str] = {name: name for name in src.inputs}
        self.ints: dict[str, tuple[str, float]] = {}
        self.rows: dict[str, str] = {}  # int8 [M, K] views of inputs of rank > 2
        self.absorbed: set[int] = set()
        self.users = src.consumer_map()
        self.bias_targets: dict[str, BiasTarget] = {}  # QConv/QGemm output -> its float mean

    def run(self) -> Graph:
        for node in self.src.nodes:
            if id(node) in self.absorbed:
                continue
            handler = HANDLERS.get(node.op)
            if handler is None or not handler(self, node):
                self.emit_float(node)
        for name in self.src.outputs:
            if self.float_of(name) != name:
                raise QuantizationError(f"graph output {name} could not keep its name")
        self.g.outputs = list(self.src.outputs)
        g = verify(self.g.remove_dead())
        if not self.plan.correction_inputs:
            return g
        return verify(correct_biases(g, self.bias_targets, self.plan.correction_inputs))

    # -- values -----------------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.g.values or name in self.src.values:
            i += 1
            name = f"{base}.{i}"
        return name

    def const(self, name: str) -> np.ndarray | None:
        return self.src.const_data(name)

    def add_const(self, base: str, data: np.ndarray) -> str:
        name = self.fresh(base)
        self.g.add_value(const(name, data))
        return name

    def is_float_act(self, name: str) -> bool:
        v = self.src.values[name]
        return not v.is_const and v.dtype == "float32"

    def channel_coding(self, name: str) -> Coding | None:
        """The value's coding when it has per-channel scales, else None."""
        coding = self.plan.codings.get(name)
        return coding if coding is not None and coding.channel_scales is not None else None

    def unsigned(self, name: str) -> bool:
        """Whether the value is coded with zero point -128."""
        coding = self.plan.codings.get(name)
        return coding is not None and coding.unsigned

    def scale_of(self, name: str) -> float | None:
        """The value's scale; for a value with per-channel scales, whose readers fold them, its
        `Coding.step` (a stream's factor, else 1.0); an int8 value's as it was emitted."""
        channel = self.channel_coding(name)
        if channel is not None:
            return channel.step
        if name in self.ints:
            return self.ints[name][1]
        return self.plan.scale(name) if self.is_float_act(name) else None

    def float_of(self, name: str) -> str:
        """The name of `name` as float in the new graph (a Dequantize the first time it is needed)."""
        if name in self.floats:
            return self.floats[name]
        value = self.src.values[name]
        if value.is_const:
            self.g.values.setdefault(name, value)
            self.floats[name] = name
            return name
        coding = self.plan.codings.get(name)
        if coding is not None and not coding.dequantizable:
            raise QuantizationError(
                f"{name} has per-channel scales or a zero point and cannot be dequantized"
            )
        qname, scale = self.ints[name]
        out = name if name in self.src.outputs and name not in self.g.values else self.fresh(f"{name}.dq")
        append(self.g, "Dequantize", [qname], [out], {"scale": scale})
        self.floats[name] = out
        return out

    def int8_of(self, name: str) -> str:
        """The name of `name` as int8 (a Quantize the first time; the caller checked its scale)."""
        if name in self.ints:
            return self.ints[name][0]
        coding = self.plan.codings[name]
        out = self.fresh(f"{name}.q")
        attrs = {"scale": coding.scale, "zero_point": coding.zero_point}  # a float producer's value
        append(self.g, "Quantize", [self.float_of(name)], [out], attrs)
        self.ints[name] = (out, coding.scale)
        return out

    def emit_int8(
        self, name: str, op: str, inputs: Sequence[str], attrs: Mapping[str, object], scale: float
    ) -> str:
        """Append an op whose int8 output stands for float value `name` at `scale`."""
        out = self.fresh(f"{name}.q") if name in self.src.outputs else name
        append(self.g, op, inputs, [out], attrs)
        self.ints[name] = (out, scale)
        return out

    def emit_float(self, node: Node) -> None:
        append(self.g, node.op, [self.float_of(i) for i in node.inputs], node.outputs, node.attrs)
        self.floats.update((o, o) for o in node.outputs)

    # -- patterns ---------------------------------------------------------------------------------

    def activation_after(self, name: str) -> _Act | None:
        """The Relu or Clip that is the only user of `name`, when it can fold into `name`'s op."""
        users = self.users.get(name, [])
        if name in self.src.outputs or len(users) != 1 or users[0].op not in ("Relu", "Clip"):
            return None
        act = users[0]
        if act.op == "Relu":
            lo, hi = 0.0, math.inf
        else:
            lo, hi = act.float_attr("min"), act.float_attr("max")
        if lo > hi:
            return None
        if self.plan.strict:
            pre, post = self.plan.scale(name), self.plan.scale(act.outputs[0])
            if pre is not None and pre != post:
                return None
        return _Act(act, lo, hi)

    def clip_bounds(self, act: _Act | None, scale: float, offset: int = 0) -> tuple[int, int]:
        """The int8 codes of the activation's bounds at `scale`, codes being round(x / scale) - `offset`."""
        if act is None:
            return INT8_MIN, INT8_MAX
        return _to_int8(act.lo, scale, offset), _to_int8(act.hi, scale, offset)

    def single_user(self, name: str, op: str) -> Node | None:
        users = self.users.get(name, [])
        if name in self.src.outputs or len(users) != 1 or users[0].op != op:
            return None
        return users[0]


def _to_int8(bound: float, scale: float, offset: int = 0) -> int:
    """A float bound in int8 steps (less `offset`), rounded as Quantize rounds (so the clip is exact)."""
    if math.isinf(bound):
        return INT8_MAX if bound > 0 else INT8_MIN
    q = float(np.rint(np.float32(bound) / np.float32(scale))) - offset
    return int(min(max(q, INT8_MIN), INT8_MAX))


# -- dense layers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dense:
    """A convolution or dense product to lower: its input, weight (output channels on
    `w_axis`), optional bias, the pre-activation output and the nodes it absorbs."""

    op: str
    x: str
    w: str
    w_axis: int
    bias: str | None
    out: str
    attrs: Mapping[str, object]
    absorbs: tuple[Node, ...] = ()


def _lower_dense(lw: _Rewrite, d: _Dense) -> bool:
    if d.out in lw.plan.keep_float:
        return False
    act = lw.activation_after(d.out)
    out = act.node.outputs[0] if act else d.out
    s_in, s_out = lw.scale_of(d.x), lw.scale_of(out)
    w_float = lw.const(d.w)
    folded = lw.channel_coding(d.x)
    if s_in is None or s_out is None or w_float is None:
        if folded or lw.unsigned(d.x):
            raise QuantizationError(
                f"node {d.out} ({d.op}) reads {d.x}, which has per-channel scales or a zero point, "
                "but cannot be lowered"
            )
        return False
    if folded:
        w_float = _fold_input_scales(d, w_float, folded, lw.plan.weights)
    qw = _weight(lw, d, w_float)
    w_int = np.moveaxis(qw.data, qw.axis, 0) if qw.axis != 0 else qw.data
    channels = w_int.shape[0]
    acc_scale = s_in * qw.channel_scales(channels)
    bias = _bias(lw, d, acc_scale, channels)
    attrs = dict(d.attrs)
    if lw.unsigned(d.x):
        bias = _unsigned_input_bias(d, bias, w_int)
        if any(d.attrs["pads"]):  # type: ignore[arg-type]
            attrs["pad_value"] = -UNSIGNED_OFFSET  # the code of zero
    out_scales = _output_channel_scales(lw, d, out, channels)
    reals = acc_scale / (s_out if out_scales is None else np.asarray(out_scales, np.float64))
    observed = _observed(lw, d.out, acc_scale)
    bounds = accumulator_bounds(w_int, bias, reals, observed)
    offset = UNSIGNED_OFFSET if lw.unsigned(out) else 0
    mult, shift = channel_requant(reals, bounds + np.ceil(offset / reals), f"node {d.out} ({d.op})")
    offset_acc = np.zeros(channels)
    if offset:  # the codes are round(y / s) - offset: offset output steps less before the shift
        offset_acc = np.rint(offset * float(1 << shift) / mult.astype(np.float64))
        bias = int32_bias(bias.astype(np.float64) - offset_acc, f"node {d.out} ({d.op})")
    lo, hi = (
        _channel_clip_bounds(lw, act, out, out_scales, offset)
        if out_scales is not None
        else lw.clip_bounds(act, s_out, offset)
    )
    attrs |= {"shift": shift, "clip_lo": lo, "clip_hi": hi, "out_scale": s_out}
    consts = [
        lw.add_const(f"{d.w}.q", np.ascontiguousarray(w_int)),
        lw.add_const(f"{d.out}.bias", bias),
        lw.add_const(f"{d.out}.mult", mult),
    ]
    name = _emit_dense(lw, d, out, consts, attrs, s_out)
    mean = _channel_mean(lw, d.out)
    if mean is not None and d.op == "QConv":  # convolutions only: see compiler.quant.bias
        lw.bias_targets[name] = BiasTarget(mean, acc_scale, -offset_acc)
    lw.absorbed.update(id(n) for n in d.absorbs + ((act.node,) if act else ()))
    return True


def _output_channel_scales(lw: _Rewrite, d: _Dense, out: str, channels: int) -> np.ndarray | None:
    """The per-channel scales of the layer's output `out`, one per output channel; None where it
    has one scale."""
    coding = lw.channel_coding(out)
    scales = None if coding is None else coding.channel_scales
    if scales is not None and np.asarray(scales).shape != (channels,):
        where = f"node {d.out} ({d.op})"
        raise QuantizationError(f"{where}: {np.size(scales)} scales for {channels} channels of {out}")
    return scales


def _fold_input_scales(d: _Dense, w_float: np.ndarray, x: Coding, fixed: Collection[str]) -> np.ndarray:
    """w'[k, c] = w[k, c] * s_c / t for a group-1 convolution reading a value with per-channel
    scales s_c and step t (`Coding.folded`); its weights must not be fixed already (`fixed`)."""
    scales = x.folded
    if d.op != "QConv" or d.attrs.get("group") != 1 or d.w in fixed or w_float.shape[1] != scales.size:
        raise QuantizationError(
            f"node {d.out} ({d.op}) cannot fold the {scales.size} channel scales of {d.x} into its weights"
        )
    return w_float.astype(np.float64) * scales.reshape(1, -1, 1, 1)


def _unsigned_input_bias(d: _Dense, bias: np.ndarray, w_int: np.ndarray) -> np.ndarray:
    """The bias of a layer reading an unsigned value: + offset * sum w_q[k] (exact where padding
    reads the code of zero, -offset)."""
    if d.op != "QConv" or (any(d.attrs["pads"]) and d.attrs["group"] == 1):  # type: ignore[arg-type]
        raise QuantizationError(
            f"node {d.out} ({d.op}) reads {d.x}, which has a zero point, but pads its input with one group"
        )
    total = w_int.astype(np.int64).reshape(w_int.shape[0], -1).sum(axis=1)
    return int32_bias(bias.astype(np.float64) + UNSIGNED_OFFSET * total, f"node {d.out} ({d.op})")


def _channel_clip_bounds(
    lw: _Rewrite, act: _Act | None, out: str, scales: np.ndarray, offset: int = 0
) -> tuple[int, int]:
    """The clip of an output with per-channel scales: every channel's bounds must be the same integers."""
    bounds = {lw.clip_bounds(act, float(s), offset) for s in np.asarray(scales).reshape(-1)}
    if len(bounds) != 1:
        raise QuantizationError(
            f"{out}: its activation bounds are different integers at its channel scales {sorted(bounds)}"
        )
    return bounds.pop()


def _weight(lw: _Rewrite, d: _Dense, w_float: np.ndarray) -> QWeight:
    qw = lw.plan.weights.get(d.w)
    if qw is None:
        return quantize_weight(w_float, d.w_axis, _moment(lw, d))
    if qw.scales.size > 1 and qw.axis != d.w_axis:
        raise QuantizationError(
            f"node {d.out} ({d.op}): weight {d.w} is quantized per channel along axis {qw.axis}, "
            f"its output channels are axis {d.w_axis}"
        )
    return QWeight(qw.data, qw.scales, d.w_axis)


def _moment(lw: _Rewrite, d: _Dense) -> np.ndarray | None:
    """The second moment of the layer's input rows, if the calibration collected it, in the
    units its weights multiply: x_c / s_c for an input with per-channel scales s_c, whose scales
    the weights absorb (`_fold_input_scales`)."""
    cal = lw.plan.calibration
    moment = cal.moments.get(d.w) if cal is not None else None
    folded = lw.channel_coding(d.x)
    if moment is None or folded is None:
        return moment
    scales = folded.folded
    per_column = np.repeat(scales, moment.shape[-1] // scales.size)  # columns are (channel, tap)
    return moment / np.outer(per_column, per_column)


def _bias(lw: _Rewrite, d: _Dense, acc_scale: np.ndarray, channels: int) -> np.ndarray:
    if d.bias is None:
        return np.zeros(channels, np.int32)
    fixed = lw.plan.biases.get(d.bias)
    if fixed is not None and fixed[0].size == channels:
        q, scales = fixed
        if np.allclose(np.broadcast_to(scales, (channels,)), acc_scale, rtol=1e-6, atol=0.0):
            return np.asarray(q, np.int32).reshape(channels)
    data = lw.const(d.bias)
    assert data is not None
    return quantize_bias(data.reshape(channels), acc_scale, f"node {d.out} ({d.op})")


def _channel_mean(lw: _Rewrite, name: str) -> np.ndarray | None:
    """The float pre-activation's mean per channel on the calibration data, if calibrated."""
    cal = lw.plan.calibration
    stats = cal.stats.get(name) if cal is not None else None
    axis = channel_axis(lw.src.values[name].rank)
    return stats.axis_mean(axis) if stats is not None and axis in stats.axis_sum else None


def _observed(lw: _Rewrite, name: str, acc_scale: np.ndarray) -> np.ndarray | None:
    """Largest |acc + bias| per channel on the calibration data (accumulator units), if calibrated."""
    cal = lw.plan.calibration
    stats = cal.stats.get(name) if cal is not None else None
    if stats is None:
        return None
    per = stats.axis_absmax.get(channel_axis(lw.src.values[name].rank))
    return None if per is None else per / acc_scale


def _emit_dense(
    lw: _Rewrite, d: _Dense, out: str, consts: list[str], attrs: Mapping[str, object], s_out: float
) -> str:
    """Append the QConv/QGemm (and the reshapes around a QGemm of rows); the name of its output."""
    xq = lw.int8_of(d.x)
    x_shape = lw.src.values[d.x].shape
    if d.op == "QConv" or len(x_shape) == 2:
        return lw.emit_int8(out, d.op, [xq, *consts], attrs, s_out)
    flat = lw.rows.get(d.x)
    if flat is None:  # one [M, K] view of an input that several dense layers read
        flat = lw.rows[d.x] = lw.fresh(f"{d.x}.2d")
        append(lw.g, "Reshape", [xq], [flat], {"shape": (math.prod(x_shape[:-1]), x_shape[-1])})
    y = lw.fresh(f"{out}.2d")
    append(lw.g, d.op, [flat, *consts], [y], attrs)
    lw.emit_int8(out, "Reshape", [y], {"shape": lw.src.values[out].shape}, s_out)
    return y


def _conv(lw: _Rewrite, node: Node) -> bool:
    if not lowers_to_qconv(lw.src, node):
        return False
    bias = node.inputs[2] if len(node.inputs) == 3 else None
    attrs = {k: node.attrs[k] for k in ("strides", "pads", "group")}
    return _lower_dense(lw, _Dense("QConv", node.inputs[0], node.inputs[1], 0, bias, node.outputs[0], attrs))


def _gemm(lw: _Rewrite, node: Node) -> bool:
    x, w = node.inputs[:2]
    bias = node.inputs[2] if len(node.inputs) == 3 else None
    canonical = (node.attrs["transA"], node.attrs["transB"], node.attrs["alpha"], node.attrs["beta"]) == (
        0,
        1,
        1,
        1,
    )
    wd = lw.const(w)
    if not canonical or wd is None or lw.src.values[x].rank != 2:
        return False
    if bias is not None:
        b = lw.const(bias)
        if b is None or b.size != wd.shape[0]:
            return False
    return _lower_dense(lw, _Dense("QGemm", x, w, 0, bias, node.outputs[0], {}))


def _matmul(lw: _Rewrite, node: Node) -> bool:
    """MatMul(x, W[K, N] constant), with the Add of a constant [N] bias that follows it when there is one."""
    x, w = node.inputs
    wd = lw.const(w)
    if wd is None or wd.ndim != 2 or lw.src.values[x].rank < 2 or lw.const(x) is not None:
        return False
    out, bias, absorbs = node.outputs[0], None, tuple[Node, ...]()
    add = lw.single_user(out, "Add")
    if add is not None:
        other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
        b = lw.const(other)
        if b is not None and b.size == wd.shape[1] and b.shape[-1:] == (wd.shape[1],) and other != out:
            out, bias, absorbs = add.outputs[0], other, (add,)
    return _lower_dense(lw, _Dense("QGemm", x, w, 1, bias, out, {}, absorbs))


# -- element-wise and pooling ----------------------------------------------------------------------


def _add(lw: _Rewrite, node: Node) -> bool:
    a, b = node.inputs
    if not (lw.is_float_act(a) and lw.is_float_act(b)) or lw.src.values[a].shape != lw.src.values[b].shape:
        return False
    act = lw.activation_after(node.outputs[0])
    out = act.node.outputs[0] if act else node.outputs[0]
    s_a, s_b, s_out = lw.scale_of(a), lw.scale_of(b), lw.scale_of(out)
    if s_a is None or s_b is None or s_out is None:
        return False
    _check_stream_profiles(lw, (a, b, out), f"node {out} (QAdd)")
    (mult_a, mult_b), shift = immediate_requant(np.array([s_a, s_b]) / s_out, ACT_MAX, f"node {out} (QAdd)")
    lo, hi = lw.clip_bounds(act, s_out)
    attrs = {
        "mult_a": mult_a,
        "mult_b": mult_b,
        "shift": shift,
        "clip_lo": lo,
        "clip_hi": hi,
        "out_scale": s_out,
    }
    lw.emit_int8(out, "QAdd", [lw.int8_of(a), lw.int8_of(b)], attrs, s_out)
    if act:
        lw.absorbed.add(id(act.node))
    return True


def _check_stream_profiles(lw: _Rewrite, names: Sequence[str], where: str) -> None:
    """An add's operands and result have per-channel scales all or none, and then one profile
    (scales over stream factor, `Coding.folded`), so that its multipliers are scalars."""
    scaled = [lw.channel_coding(name) for name in names]
    if not any(scaled):
        return
    if not all(c is not None and c.stream for c in scaled):
        listed = ", ".join(names)
        raise QuantizationError(f"{where}: {listed} are not all values of one stream with channel scales")
    first, *rest = (c.folded for c in scaled if c is not None)
    if any(not np.allclose(first, other, rtol=1e-6, atol=0.0) for other in rest):
        raise QuantizationError(f"{where}: {', '.join(names)} have channel scales of different profiles")


def _global_pool(lw: _Rewrite, node: Node) -> bool:
    x, out = node.inputs[0], node.outputs[0]
    shape = lw.src.values[x].shape
    if node.op == "ReduceMean" and (node.ints_attr("axes") != (2, 3)):
        return False
    s_in, s_out = lw.scale_of(x), lw.scale_of(out)
    if len(shape) != 4 or s_in is None or s_out is None:
        return False
    cells = shape[2] * shape[3]
    (mult,), shift = immediate_requant(np.array([s_in / (cells * s_out)]), ACT_MAX * cells, f"node {out}")
    attrs = {"mult": mult, "shift": shift, "out_scale": s_out}
    if node.op == "GlobalAveragePool" or node.int_attr("keepdims"):
        lw.emit_int8(out, "QGlobalAvgPool", [lw.int8_of(x)], attrs, s_out)
        return True
    pooled = lw.fresh(f"{out}.pool")
    append(lw.g, "QGlobalAvgPool", [lw.int8_of(x)], [pooled], attrs)
    lw.emit_int8(out, "Reshape", [pooled], {"shape": lw.src.values[out].shape}, s_out)
    return True


def _keeps_scale(lw: _Rewrite, node: Node) -> bool:
    """MaxPool, Relu, Flatten, Reshape on an int8 value: int8 out, the input's scale."""
    x, out = node.inputs[0], node.outputs[0]
    if x not in lw.ints:
        return False
    qname, scale = lw.ints[x]
    declared = lw.plan.scale(out)
    if lw.plan.strict and declared is not None and declared != scale:
        return False
    lw.emit_int8(out, node.op, [qname], node.attrs, scale)
    return True


HANDLERS: dict[str, Callable[[_Rewrite, Node], bool]] = {
    "Conv": _conv,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Add": _add,
    "GlobalAveragePool": _global_pool,
    "ReduceMean": _global_pool,
    "MaxPool": _keeps_scale,
    "Relu": _keeps_scale,
    "Flatten": _keeps_scale,
    "Reshape": _keeps_scale,
}
