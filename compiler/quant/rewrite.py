"""Float graph + quantization parameters -> quantized graph (the quantized-graph contract of
compiler.graph.opdefs.qops), fusing as it goes.

Fusions: Conv (+ bias) and dense layers (canonical Gemm, or MatMul by a constant [K, N] plus an
Add of a constant bias; inputs of rank > 2 are flattened to [M, K] around the QGemm) become
QConv/QGemm with their requantization; a Relu or Clip that is the only user of such a result,
of a residual Add, folds into the op's clip bounds (clip(round(y / s)) is exact for any bounds,
rounding being monotone). Add of two activations of one shape becomes QAdd;
GlobalAveragePool (and ReduceMean over H, W) QGlobalAvgPool. MaxPool, Relu, Flatten and
Reshape of an int8 value stay int8 with the input's scale. Every other op runs in float:
Dequantize and Quantize nodes are inserted where a value changes representation, once per value.

**Per-channel activation scales.** A value in `QuantParams.channel_scales` (see
`channel_scaled_values`: a depthwise convolution's output, after its Relu/Clip, that only group-1
convolutions read) is int8 with one scale s_c per channel. Its producer is a QConv as any other:
its per-channel multipliers already stand for in_scale * w_scale[k] / out_scale, with s_k as
out_scale; its attribute `out_scale` is 1.0, and the value is recorded at scale 1.0, because each
reader folds the scales into its float weights before quantizing them, w'[k, c] = w[k, c] * s_c
(exact: sum_c w[k, c] * x_c = sum_c w'[k, c] * q_c), and then has input scale 1 and accumulator
scale w'_scale[k]. The integer ops are unchanged; such a value never becomes float (there is no
one scale to dequantize it with).

The values of a linear residual stream's stage (`channel_scaled_streams`: MobileNetV2's bottleneck
outputs and the adds that join them) take per-channel scales t_v * p_c, with one profile p for the
whole stage and a factor t_v per value (`QuantParams.stream_scales`). The factor is the value's
scale: an add of two such values takes the scalar multipliers t_a / t_out and t_b / t_out (exact,
the profile cancelling), a fused residual likewise, and readers fold p_c alone into their weights.

**Unsigned activations.** A value in `QuantParams.unsigned` (see `unsigned_values`: a Relu or
Clip(min >= 0) output of a convolution that only unpadded or grouped convolutions read:
MobileNetV2's depthwise outputs and the expand outputs its depthwise convolutions read) is never
negative, and symmetric int8 would spend its sign bit on nothing. It takes 255 steps instead of
127: its scale is amax / 255 and its int8 code is round(x / s) - 128 (zero point -128). The ops
stay those of the contract: the producer's clip bounds start at -128, and its bias is lowered by
128 * 2**shift / mult[k] (rounded to an accumulator step, at most half of mult / 2**shift output
steps off; bias correction sees the offset as intended); each reader's bias is raised by 128 *
sum w_q[k], and a reader that pads reads -128 there (QConv's `pad_value`, the code of zero):
every tap of a patch then reads a code, and sum w * (q + 128) = sum w * q + 128 * sum w, exactly.
A group-1 reader may not pad: the accelerator pads with zeros only, and would leave it to the
host (compiler.runtime.model). Such a value never becomes float; where its producer stays float
(`keep_float`, MobileNetV2's first convolution), it enters as a Quantize with zero point -128.

`QuantParams.strict` is for QDQ files, whose every scale is binding: an activation folds into
the op before it only when both tensors share a scale, and an int8 MaxPool/Relu/Flatten/Reshape
only when its output keeps its input's scale; otherwise the file's requantization is kept (a
float op between Dequantize and Quantize), as onnxruntime computes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.graph.builder import append
from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs.qops import INT8_MAX, INT8_MIN
from compiler.graph.verify import verify
from compiler.quant.bias import BiasTarget, correct_biases
from compiler.quant.calibrate import Calibration, channel_axis
from compiler.quant.errors import QuantizationError
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

# An unsigned value's int8 code is round(x / scale) - UNSIGNED_OFFSET (see the module doc).
UNSIGNED_OFFSET = 128


@dataclass(frozen=True)
class QuantParams:
    """What the lowering needs besides the float graph.

    `scales`: activation value -> scale (amax / 127); a value without one stays float.
    `weights`, `biases`: int8 weights and (int32 bias, its scales) already fixed (a QDQ file's),
    by the name of the float constant they stand for; other weights and biases are quantized
    here, as is a fixed bias whose scale is not the accumulator's.
    `calibration`: statistics bounding the accumulators (None: the data-free bound); where it
    holds the second moments of a layer's inputs, the layer's weights are rounded by GPTQ
    (compiler.quant.rounding) instead of to nearest.
    `channel_scales`: activation value -> one scale per channel (axis 1), for values that
    `channel_scaled_values` allows (see the module doc); they take precedence over `scales`.
    `correction_inputs`: calibration inputs on which each QConv's bias is corrected so
    that its pre-activation averages what `calibration` saw (compiler.quant.bias); () for none.
    `unsigned`: values that `unsigned_values` allows, coded with zero point -128 (see the
    module doc); their scales (in `scales` or `channel_scales`) are thresholds / 255.
    `keep_float`: outputs of convolutions and dense layers that stay float (with their Relu/Clip).
    `stream_scales`: for the values of `channel_scaled_streams`'s stages, which also have
    `channel_scales`, the factor t with channel_scales = t * the stage's profile (see the module
    doc); an add of two such values takes the scalar multipliers of their factors.
    """

    scales: Mapping[str, float]
    weights: Mapping[str, QWeight] = field(default_factory=dict)
    biases: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    calibration: Calibration | None = None
    strict: bool = False
    channel_scales: Mapping[str, np.ndarray] = field(default_factory=dict)
    correction_inputs: Sequence[Mapping[str, np.ndarray]] = ()
    unsigned: frozenset[str] = frozenset()
    keep_float: frozenset[str] = frozenset()
    stream_scales: Mapping[str, float] = field(default_factory=dict)


def channel_scaled_values(graph: Graph, kept: Collection[str] = ()) -> list[str]:
    """The activations of `graph` that may take per-channel scales: the output of a depthwise
    (group > 1) convolution with constant 4-d weights, or of the Relu/Clip that is its only
    user, when the value is no graph output and every reader is a group-1 convolution with
    constant 4-d weights, dilations 1, a constant or no bias, that can fold the scales into its
    weights and whose result (after its own Relu/Clip, if any) is no graph output. Convolutions
    whose outputs are in `kept` stay float and take part in neither role."""
    users = graph.consumer_map()
    found = []
    for node in graph.nodes:
        if node.op != "Conv" or node.int_attr("group") == 1 or not _const_4d(graph, node.inputs[1]):
            continue
        if node.outputs[0] in kept:
            continue
        name = node.outputs[0]
        after = users.get(name, [])
        if len(after) == 1 and after[0].op in ("Relu", "Clip") and name not in graph.outputs:
            name = after[0].outputs[0]
        readers = users.get(name, [])
        if name in graph.outputs or not readers:
            continue
        if not all(_absorbs(graph, users, r, name, kept) for r in readers):
            continue
        found.append(name)
    return found


def channel_scaled_streams(
    graph: Graph, values: Collection[str], kept: Collection[str] = ()
) -> list[list[str]]:
    """The stages of residual streams among `values` (linear stream values, compiler.quant.static)
    that may take per-channel scales with one profile per stage: `values` grouped by the adds
    that join them, each group kept when every value is 4-d and no graph output, made by a
    convolution that lowers to a QConv (none of `kept`, which stay float) or by an add of two
    values of the group, and read only by such adds and by group-1 convolutions that can fold
    the scales into their weights."""
    pool = set(values)
    group = {v: {v} for v in pool}
    for node in graph.nodes:
        if node.op == "Add" and node.outputs[0] in pool:
            for name in node.inputs:
                if name in pool and group[name] is not group[node.outputs[0]]:
                    merged = group[name] | group[node.outputs[0]]
                    for v in merged:
                        group[v] = merged
    users = graph.consumer_map()
    stages, seen = [], set()
    for v in values:
        if v in seen:
            continue
        stage = group[v]
        seen |= stage
        if all(_stream_member(graph, users, x, stage, kept) for x in stage):
            stages.append([x for x in values if x in stage])
    return stages


def _stream_member(graph: Graph, users: Mapping[str, list[Node]], name: str, stage: Collection[str],
                   kept: Collection[str]) -> bool:
    value = graph.values[name]
    producer = graph.producer(name)
    if value.rank != 4 or value.is_const or name in graph.outputs or producer is None or name in kept:
        return False
    if producer.op == "Add":
        made = all(x in stage for x in producer.inputs)
    else:
        made = producer.op == "Conv" and _lowers_to_qconv(graph, producer)
    readers = users.get(name, [])
    joined = (r.op == "Add" and r.outputs[0] in stage and all(x in stage for x in r.inputs) for r in readers)
    folds = (r.op == "Conv" and _absorbs(graph, users, r, name, kept) for r in readers)
    return made and bool(readers) and all(a or b for a, b in zip(joined, folds, strict=True))


def _lowers_to_qconv(graph: Graph, node: Node) -> bool:
    """Whether Conv `node` has what `_conv` needs to lower it (a float input with a scale aside):
    constant 4-d weights, dilations 1, and a constant bias or none."""
    if not _const_4d(graph, node.inputs[1]) or set(node.ints_attr("dilations")) != {1}:
        return False
    return len(node.inputs) < 3 or graph.const_data(node.inputs[2]) is not None


def unsigned_values(graph: Graph, kept: Collection[str] = ()) -> list[str]:
    """The activations of `graph` that may be coded unsigned (zero point -128): the output of a
    Relu, or of a Clip with min >= 0, that is the only user of a convolution with constant 4-d
    weights or of one in `kept` (which stays float: a Quantize with zero point -128 follows),
    when the value is no graph output and every reader is a convolution that lowers to a QConv
    (`_absorbs`, any group, none of `kept`) and is grouped or pads nothing."""
    users = graph.consumer_map()
    found = []
    for node in graph.nodes:
        if node.op not in ("Relu", "Clip") or (node.op == "Clip" and node.float_attr("min") < 0):
            continue
        producer = graph.producer(node.inputs[0])
        if producer is None or producer.op != "Conv":
            continue
        if not _const_4d(graph, producer.inputs[1]) and node.inputs[0] not in kept:
            continue
        if users.get(node.inputs[0]) != [node] or node.inputs[0] in graph.outputs:
            continue
        name = node.outputs[0]
        readers = users.get(name, [])
        if name in graph.outputs or not readers:
            continue
        if all(_absorbs(graph, users, r, name, kept, any_group=True)
               and (r.int_attr("group") > 1 or not any(r.ints_attr("pads"))) for r in readers):
            found.append(name)
    return found


def _const_4d(graph: Graph, name: str) -> bool:
    w = graph.const_data(name)
    return w is not None and w.ndim == 4


def _absorbs(graph: Graph, users: Mapping[str, list[Node]], reader: Node, name: str, kept: Collection[str],
             any_group: bool = False) -> bool:
    """Whether `reader` is a convolution of `name` (group 1 unless `any_group`) that lowers to a QConv."""
    if reader.op != "Conv" or reader.inputs[0] != name or name in reader.inputs[1:]:
        return False
    if reader.outputs[0] in kept:
        return False
    if (reader.int_attr("group") != 1 and not any_group) or not _lowers_to_qconv(graph, reader):
        return False
    out = reader.outputs[0]
    after = users.get(out, [])
    if len(after) == 1 and after[0].op in ("Relu", "Clip"):
        return out not in graph.outputs and after[0].outputs[0] not in graph.outputs
    return out not in graph.outputs


def lower(graph: Graph, params: QuantParams) -> Graph:
    """The quantized graph of float `graph` (verified); inputs and outputs keep their names and types."""
    return _Lowering(graph, params).run()


@dataclass(frozen=True)
class _Act:
    """An activation folded into the op before it: its node and bounds (float units)."""

    node: Node
    lo: float
    hi: float


class _Lowering:
    def __init__(self, src: Graph, params: QuantParams) -> None:
        self.src, self.p = src, params
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
        if not self.p.correction_inputs:
            return g
        return verify(correct_biases(g, self.bias_targets, self.p.correction_inputs))

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

    def scale_of(self, name: str) -> float | None:
        """The value's scale; for a value with per-channel scales, whose readers fold them, its
        stream factor (`QuantParams.stream_scales`), else 1.0."""
        if name in self.p.channel_scales:
            return self.p.stream_scales.get(name, 1.0)
        if name in self.ints:
            return self.ints[name][1]
        return self.p.scales.get(name) if self.is_float_act(name) else None

    def float_of(self, name: str) -> str:
        """The name of `name` as float in the new graph (a Dequantize the first time it is needed)."""
        if name in self.floats:
            return self.floats[name]
        value = self.src.values[name]
        if value.is_const:
            self.g.values.setdefault(name, value)
            self.floats[name] = name
            return name
        if name in self.p.channel_scales or name in self.p.unsigned:
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
        scale = self.p.scales[name]
        out = self.fresh(f"{name}.q")
        zero = -UNSIGNED_OFFSET if name in self.p.unsigned else 0  # a float producer's unsigned value
        append(self.g, "Quantize", [self.float_of(name)], [out], {"scale": scale, "zero_point": zero})
        self.ints[name] = (out, scale)
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
        if self.p.strict:
            pre, post = self.p.scales.get(name), self.p.scales.get(act.outputs[0])
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


def _lower_dense(lw: _Lowering, d: _Dense) -> bool:
    if d.out in lw.p.keep_float:
        return False
    act = lw.activation_after(d.out)
    out = act.node.outputs[0] if act else d.out
    s_in, s_out = lw.scale_of(d.x), lw.scale_of(out)
    w_float = lw.const(d.w)
    folded = d.x in lw.p.channel_scales
    if s_in is None or s_out is None or w_float is None:
        if folded or d.x in lw.p.unsigned:
            raise QuantizationError(
                f"node {d.out} ({d.op}) reads {d.x}, which has per-channel scales or a zero point, "
                "but cannot be lowered"
            )
        return False
    if folded:
        w_float = _fold_input_scales(lw, d, w_float)
    qw = _weight(lw, d, w_float)
    w_int = np.moveaxis(qw.data, qw.axis, 0) if qw.axis != 0 else qw.data
    channels = w_int.shape[0]
    acc_scale = s_in * qw.channel_scales(channels)
    bias = _bias(lw, d, acc_scale, channels)
    attrs = dict(d.attrs)
    if d.x in lw.p.unsigned:
        bias = _unsigned_input_bias(d, bias, w_int)
        if any(d.attrs["pads"]):  # type: ignore[arg-type]
            attrs["pad_value"] = -UNSIGNED_OFFSET  # the code of zero
    out_scales = lw.p.channel_scales.get(out)
    if out_scales is not None and np.asarray(out_scales).shape != (channels,):
        raise QuantizationError(
            f"node {d.out} ({d.op}): {np.size(out_scales)} scales for {channels} channels of {out}"
        )
    reals = acc_scale / (s_out if out_scales is None else np.asarray(out_scales, np.float64))
    observed = _observed(lw, d.out, acc_scale)
    bounds = accumulator_bounds(w_int, bias, reals, observed)
    offset = UNSIGNED_OFFSET if out in lw.p.unsigned else 0
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


def _fold_input_scales(lw: _Lowering, d: _Dense, w_float: np.ndarray) -> np.ndarray:
    """w'[k, c] = w[k, c] * s_c / t for a group-1 convolution reading a value with per-channel
    scales s_c and scale t (`_folded_scales`)."""
    scales = _folded_scales(lw, d.x)
    if d.op != "QConv" or d.attrs.get("group") != 1 or d.w in lw.p.weights or w_float.shape[1] != scales.size:
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
    lw: _Lowering, act: _Act | None, out: str, scales: np.ndarray, offset: int = 0
) -> tuple[int, int]:
    """The clip of an output with per-channel scales: every channel's bounds must be the same integers."""
    bounds = {lw.clip_bounds(act, float(s), offset) for s in np.asarray(scales).reshape(-1)}
    if len(bounds) != 1:
        raise QuantizationError(
            f"{out}: its activation bounds are different integers at its channel scales {sorted(bounds)}"
        )
    return bounds.pop()


def _weight(lw: _Lowering, d: _Dense, w_float: np.ndarray) -> QWeight:
    qw = lw.p.weights.get(d.w)
    if qw is None:
        return quantize_weight(w_float, d.w_axis, _moment(lw, d))
    if qw.scales.size > 1 and qw.axis != d.w_axis:
        raise QuantizationError(
            f"node {d.out} ({d.op}): weight {d.w} is quantized per channel along axis {qw.axis}, "
            f"its output channels are axis {d.w_axis}"
        )
    return QWeight(qw.data, qw.scales, d.w_axis)


def _folded_scales(lw: _Lowering, name: str) -> np.ndarray:
    """What a reader folds into its weights for a value with per-channel scales: the scales over
    the value's scale (`scale_of`: 1.0, or a stream value's factor, which is its input scale)."""
    scales = np.asarray(lw.p.channel_scales[name], np.float64)
    return scales / lw.p.stream_scales.get(name, 1.0)


def _moment(lw: _Lowering, d: _Dense) -> np.ndarray | None:
    """The second moment of the layer's input rows, if the calibration collected it, in the
    units its weights multiply: x_c / s_c for an input with per-channel scales s_c, whose scales
    the weights absorb (`_fold_input_scales`)."""
    cal = lw.p.calibration
    moment = cal.moments.get(d.w) if cal is not None else None
    if moment is None or d.x not in lw.p.channel_scales:
        return moment
    scales = _folded_scales(lw, d.x)
    per_column = np.repeat(scales, moment.shape[-1] // scales.size)  # columns are (channel, tap)
    return moment / np.outer(per_column, per_column)


def _bias(lw: _Lowering, d: _Dense, acc_scale: np.ndarray, channels: int) -> np.ndarray:
    if d.bias is None:
        return np.zeros(channels, np.int32)
    fixed = lw.p.biases.get(d.bias)
    if fixed is not None and fixed[0].size == channels:
        q, scales = fixed
        if np.allclose(np.broadcast_to(scales, (channels,)), acc_scale, rtol=1e-6, atol=0.0):
            return np.asarray(q, np.int32).reshape(channels)
    data = lw.const(d.bias)
    assert data is not None
    return quantize_bias(data.reshape(channels), acc_scale, f"node {d.out} ({d.op})")


def _channel_mean(lw: _Lowering, name: str) -> np.ndarray | None:
    """The float pre-activation's mean per channel on the calibration data, if calibrated."""
    cal = lw.p.calibration
    stats = cal.stats.get(name) if cal is not None else None
    axis = channel_axis(lw.src.values[name].rank)
    return stats.axis_mean(axis) if stats is not None and axis in stats.axis_sum else None


def _observed(lw: _Lowering, name: str, acc_scale: np.ndarray) -> np.ndarray | None:
    """Largest |acc + bias| per channel on the calibration data (accumulator units), if calibrated."""
    cal = lw.p.calibration
    stats = cal.stats.get(name) if cal is not None else None
    if stats is None:
        return None
    per = stats.axis_absmax.get(channel_axis(lw.src.values[name].rank))
    return None if per is None else per / acc_scale


def _emit_dense(
    lw: _Lowering, d: _Dense, out: str, consts: list[str], attrs: Mapping[str, object], s_out: float
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


def _conv(lw: _Lowering, node: Node) -> bool:
    if not _lowers_to_qconv(lw.src, node):
        return False
    bias = node.inputs[2] if len(node.inputs) == 3 else None
    attrs = {k: node.attrs[k] for k in ("strides", "pads", "group")}
    return _lower_dense(lw, _Dense("QConv", node.inputs[0], node.inputs[1], 0, bias, node.outputs[0], attrs))


def _gemm(lw: _Lowering, node: Node) -> bool:
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


def _matmul(lw: _Lowering, node: Node) -> bool:
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


def _add(lw: _Lowering, node: Node) -> bool:
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


def _check_stream_profiles(lw: _Lowering, names: Sequence[str], where: str) -> None:
    """An add's operands and result have per-channel scales all or none, and then one profile
    (scales over stream factor, `_folded_scales`), so that its multipliers are scalars."""
    scaled = [name in lw.p.channel_scales for name in names]
    if not any(scaled):
        return
    if not all(scaled) or any(name not in lw.p.stream_scales for name in names):
        listed = ", ".join(names)
        raise QuantizationError(f"{where}: {listed} are not all values of one stream with channel scales")
    first, *rest = (_folded_scales(lw, name) for name in names)
    if any(not np.allclose(first, other, rtol=1e-6, atol=0.0) for other in rest):
        raise QuantizationError(f"{where}: {', '.join(names)} have channel scales of different profiles")


def _global_pool(lw: _Lowering, node: Node) -> bool:
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


def _keeps_scale(lw: _Lowering, node: Node) -> bool:
    """MaxPool, Relu, Flatten, Reshape on an int8 value: int8 out, the input's scale."""
    x, out = node.inputs[0], node.outputs[0]
    if x not in lw.ints:
        return False
    qname, scale = lw.ints[x]
    if lw.p.strict and lw.p.scales.get(out, scale) != scale:
        return False
    lw.emit_int8(out, node.op, [qname], node.attrs, scale)
    return True


HANDLERS: dict[str, Callable[[_Lowering, Node], bool]] = {
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
