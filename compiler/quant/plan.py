"""The quantization plan: how each activation of a float graph is coded as int8 (a `Coding`
record per value, gathered in a `Plan`), decided before compiler.quant.rewrite builds the
quantized graph from it. `channel_scaled_values`, `channel_scaled_streams` and
`unsigned_values` say which values the graph allows the codings below for; the scales
themselves come from calibration (compiler.quant.static) or from a QDQ file
(compiler.quant.qdq), and `codings` turns them into the records.

**Per-channel activation scales.** A value with `Coding.channel_scales` (see
`channel_scaled_values`: a depthwise convolution's output, after its Relu/Clip, that only group-1
convolutions read) is int8 with one scale s_c per channel. Its producer is a QConv as any other:
its per-channel multipliers already stand for in_scale * w_scale[k] / out_scale, with s_k as
out_scale; its attribute `out_scale` is 1.0, and the value is recorded at scale 1.0
(`Coding.step`), because each reader folds the scales into its float weights before quantizing
them, w'[k, c] = w[k, c] * s_c (exact: sum_c w[k, c] * x_c = sum_c w'[k, c] * q_c), and then has
input scale 1 and accumulator scale w'_scale[k]. The integer ops are unchanged; such a value
never becomes float (there is no one scale to dequantize it with).

The values of a linear residual stream's stage (`channel_scaled_streams`: MobileNetV2's bottleneck
outputs and the adds that join them) take per-channel scales t_v * p_c, with one profile p for the
whole stage and a factor t_v per value (`Coding.stream`: t_v is the value's per-tensor
`Coding.scale`). The factor is the value's step: an add of two such values takes the scalar
multipliers t_a / t_out and t_b / t_out (exact, the profile cancelling), a fused residual
likewise, and readers fold p_c alone into their weights (`Coding.folded`).

**Unsigned activations.** A value with `Coding.unsigned` (see `unsigned_values`: a Relu or
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
(`Plan.keep_float`, MobileNetV2's first convolution), it enters as a Quantize with zero point -128.

`Plan.strict` is for QDQ files, whose every scale is binding: an activation folds into
the op before it only when both tensors share a scale, and an int8 MaxPool/Relu/Flatten/Reshape
only when its output keeps its input's scale; otherwise the file's requantization is kept (a
float op between Dequantize and Quantize), as onnxruntime computes it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.quant.calibrate import Calibration
from compiler.quant.requant import QWeight

# An unsigned value's int8 code is round(x / scale) - UNSIGNED_OFFSET (see the module doc).
UNSIGNED_OFFSET = 128


@dataclass(frozen=True, eq=False)  # eq=False: records with arrays compare by identity
class Coding:
    """How one float activation is coded as int8 (see the module doc).

    `scale`: its per-tensor scale (amax / 127, or amax / 255 when `unsigned` and without
    channel scales): the step of its codes when it has no `channel_scales`, and the scale at
    which a Quantize codes it where its producer stays float.
    `channel_scales`: one scale per channel (axis 1), or None; readers fold them into their
    weights (`folded`).
    `stream`: a value of a residual-stream stage (it has `channel_scales`: `scale` times the
    stage's profile); its factor is `scale`, which its adds and readers compute with.
    `unsigned`: coded with zero point -128 (`UNSIGNED_OFFSET`).
    """

    scale: float
    channel_scales: np.ndarray | None = None
    stream: bool = False
    unsigned: bool = False

    def __post_init__(self) -> None:
        if self.stream and self.channel_scales is None:
            raise ValueError("a stream value's coding needs its channel scales")

    @property
    def step(self) -> float:
        """The scale the int8 tensor is recorded at, and its readers and adds compute with: 1.0
        for a value with channel scales outside a stream (its readers fold the scales), else
        `scale` (a stream value's factor)."""
        return 1.0 if self.channel_scales is not None and not self.stream else self.scale

    @property
    def zero_point(self) -> int:
        """The code of zero."""
        return -UNSIGNED_OFFSET if self.unsigned else 0

    @property
    def folded(self) -> np.ndarray:
        """What a reader folds into its weights: the channel scales over `step` (a stream's profile)."""
        if self.channel_scales is None:
            raise ValueError("only a value with channel scales has scales to fold")
        return np.asarray(self.channel_scales, np.float64) / self.step

    @property
    def dequantizable(self) -> bool:
        """Whether the value may become float (a Dequantize at one scale and no zero point)."""
        return self.channel_scales is None and not self.unsigned


@dataclass(frozen=True)
class Plan:
    """What compiler.quant.rewrite needs besides the float graph.

    `codings`: activation value -> its `Coding`; a value without one stays float.
    `weights`, `biases`: int8 weights and (int32 bias, its scales) already fixed (a QDQ file's),
    by the name of the float constant they stand for; other weights and biases are quantized by
    the rewrite, as is a fixed bias whose scale is not the accumulator's.
    `calibration`: statistics bounding the accumulators (None: the data-free bound); where it
    holds the second moments of a layer's inputs, the layer's weights are rounded by GPTQ
    (compiler.quant.rounding) instead of to nearest.
    `correction_inputs`: calibration inputs on which each QConv's bias is corrected so that its
    pre-activation averages what `calibration` saw (compiler.quant.bias); () for none.
    `keep_float`: outputs of convolutions and dense layers that stay float (with their Relu/Clip).
    `strict`: a QDQ file's scales are binding (see the module doc).
    """

    codings: Mapping[str, Coding]
    weights: Mapping[str, QWeight] = field(default_factory=dict)
    biases: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    calibration: Calibration | None = None
    correction_inputs: Sequence[Mapping[str, np.ndarray]] = ()
    keep_float: frozenset[str] = frozenset()
    strict: bool = False

    def scale(self, name: str) -> float | None:
        """`name`'s per-tensor scale, None when it has no coding."""
        coding = self.codings.get(name)
        return None if coding is None else coding.scale


def codings(
    scales: Mapping[str, float],
    channel_scales: Mapping[str, np.ndarray] | None = None,
    streams: Collection[str] = (),
    unsigned: Collection[str] = (),
) -> dict[str, Coding]:
    """One `Coding` per value of `scales` (value -> per-tensor scale): with its `channel_scales`
    where it has some, a stream value where it is in `streams` and has channel scales (a stage
    without them keeps one scale per tensor), unsigned where it is in `unsigned`. Every value
    named in the other arguments needs a scale."""
    channel = dict(channel_scales or {})
    missing = sorted((set(channel) | set(streams) | set(unsigned)) - set(scales))
    if missing:
        raise ValueError(f"{missing[0]} has no scale to code it with")
    return {name: _coding(name, scale, channel, streams, unsigned) for name, scale in scales.items()}


def _coding(name: str, scale: float, channel: Mapping[str, np.ndarray], streams: Collection[str],
            unsigned: Collection[str]) -> Coding:
    per_channel = channel.get(name)
    stream = name in streams and per_channel is not None
    return Coding(scale, per_channel, stream, name in unsigned)


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
        made = producer.op == "Conv" and lowers_to_qconv(graph, producer)
    readers = users.get(name, [])
    joined = (r.op == "Add" and r.outputs[0] in stage and all(x in stage for x in r.inputs) for r in readers)
    folds = (r.op == "Conv" and _absorbs(graph, users, r, name, kept) for r in readers)
    return made and bool(readers) and all(a or b for a, b in zip(joined, folds, strict=True))


def lowers_to_qconv(graph: Graph, node: Node) -> bool:
    """Whether Conv `node` has what the rewrite needs to lower it to a QConv (a float input with a
    scale aside): constant 4-d weights, dilations 1, and a constant bias or none."""
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
    if (reader.int_attr("group") != 1 and not any_group) or not lowers_to_qconv(graph, reader):
        return False
    out = reader.outputs[0]
    after = users.get(out, [])
    if len(after) == 1 and after[0].op in ("Relu", "Clip"):
        return out not in graph.outputs and after[0].outputs[0] not in graph.outputs
    return out not in graph.outputs
