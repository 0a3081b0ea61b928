"""Static int8 quantization of a float graph with calibration data.

    quantize(graph, calibration_inputs, method="...") -> quantized graph (verified)

The graph is cleaned first (`simplify`: batch norms folded, dense layers canonical), then run
on the calibration inputs; each activation's scale is amax / 127 with amax from the chosen
calibrator (compiler.quant.calibrate). Graph outputs get no scale, so the op that computes one
(a classifier's last dense layer) runs in float on the dequantized features: int8 logits
lose the top-1 class to ties and saturation (ResNet-18's fp32 logits rounded to int8 at their
calibrated min/max scale keep the top-1 class on 83 of 100 inputs). Weights are
quantized per output channel (max |w| / 127), a convolution's levels chosen by GPTQ for the
smallest output error on the calibration inputs (`rounding`, compiler.quant.rounding), biases to
int32 at in_scale * w_scale, and the requantization multipliers follow compiler.quant.requant's
rule with the calibration bounds.

A depthwise convolution's output that only group-1 convolutions read (MobileNetV2's, after
ReLU6, each read by one 1x1 projection) gets one scale per channel instead (`channel_scales`;
compiler.quant.plan: the readers fold them into their float weights, the integer ops are the same):
its channels' ranges differ by up to 50 times, and at one scale those outputs are the largest
source of error in MobileNetV2, where the calibration inputs agree on each channel's range.
Where they do not (`settled_channels`: a trained network's deep, image-specific channels, as
EfficientNet-Lite1's last blocks on photos) the value keeps one scale: a channel scale set by
the calibration's range saturates on the next input that excites that channel. So do the
values of a linear residual stream (MobileNetV2's bottleneck outputs and the adds that join
them), with one channel profile per stage so that the adds keep scalar multipliers
(`stream_channel_scales`, compiler.quant.plan.channel_scaled_streams). `per_channel=False`
turns both off.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.graph.opdefs.qops import INT8_MAX
from compiler.graph.passes import simplify
from compiler.quant.calibrate import CALIBRATORS, Calibration, TensorStats, collect
from compiler.quant.errors import LayerQuantizationError, QuantizationError, QuantizationWarning
from compiler.quant.plan import Plan, channel_scaled_streams, channel_scaled_values, codings, unsigned_values
from compiler.quant.rewrite import rewrite
from compiler.quant.rounding import moment_plan

DEFAULT_METHOD = "percentile"
UINT8_MAX = 255
# Weight rounding: the ops whose weights GPTQ rounds (compiler.quant.rounding), the others'
# round to nearest. GPTQ is measured on validation inputs (seed 5000, never calibration's or the
# tests'): MobileNetV2 mean cosine / top-1 over 50, 0.9902 / 0.80 -> 0.9959 / 0.94, ResNet-18
# 0.99910 / 0.94 -> 0.99949 / 0.94; on the dense models it gains nothing clear (bert-tiny over
# 40: cosine 0.9842 -> 0.9845 but its minimum 0.840 -> 0.793; mlp over 200: top-1 0.995 ->
# 0.985), so by default it rounds the convolutions only.
ROUNDINGS: dict[str, frozenset[str]] = {
    "gptq": frozenset({"Conv"}),
    "gptq-all": frozenset({"Conv", "Gemm", "MatMul"}),
    "nearest": frozenset(),
}
DEFAULT_ROUNDING = "gptq"
# GPTQ's second moments come from at most the first MOMENT_INPUTS calibration inputs: more
# inputs improve the activation statistics and bias correction, not the moments. MobileNetV2
# over 400 inputs (seed 7000), 32 calibration inputs: logit MSE 0.0316 / top-1 0.930 with every
# input's moments, 0.0318 / 0.925 with 16's (16 inputs in all: 0.0356 / 0.910); GPTQ's cost
# (and the number of layers it rounds, compiler.quant.rounding.moment_plan) stays that of 16:
# ResNet-18's quantize with 32 inputs takes 7.3 s instead of 9.9 s (4.2 s with 16). ResNet-18
# over 200 inputs: mean cosine 0.99942 with 16, 0.99940 with 32, moments capped or not.
MOMENT_INPUTS = 16
# Per-channel activation scales (see `channel_scales`): the exponent of each channel's share of
# the tensor's range, and the smallest share. Chosen on MobileNetV2 validation inputs (200,
# seed 5000; GPTQ and bias correction on), by mean cosine: alpha 0.3 0.99674 (top-1 0.920,
# logit MSE 0.0671), 0.5 0.99708 (0.905, 0.0636); without bias correction 0.3 / 0.5 / 0.7 gave
# 0.99582 / 0.99640 / 0.99609, and alpha 0 (one scale) 0.9900 over 50.
CHANNEL_ALPHA = 0.5
# The calibrator of a linear residual stream (`linear_stream_values`). Such a stream carries rare
# large values that later blocks read: on MobileNetV2 a few inputs go past the percentile
# threshold at a stage's first projection, and clipping them there is most of those inputs'
# error (3 of 60 validation inputs carried a fifth of the logit error). minmax keeps them: logit
# MSE on 100 validation inputs (seed 5000, gptq + bias correction) 0.0427 -> 0.0404, top-1 0.92.
STREAM_METHOD = "minmax"
# Per-channel scales for a linear residual stream (`stream_channel_scales`): the exponent of the
# profile shared by a stage's values. Fake quantization of MobileNetV2's stream values alone (20
# validation inputs, seed 5000, float weights) costs a logit MSE of 0.0265 at one scale per
# tensor, 0.0178 with alpha 0.5, 0.0200 with 1.0. The whole quantizer (GPTQ, bias correction,
# fused adds) over 400 inputs (seed 7000): logit MSE 0.0407 -> 0.0356, mean cosine 0.99794 ->
# 0.99820, top-1 0.910 either way.
STREAM_ALPHA = 0.5
CHANNEL_FLOOR = 2.0**-8
# The calibrator of a value with per-channel scales when `method` would be another one (a
# per-value override still wins). Its histogram mixes channels whose ranges differ by up to 50
# times, and KL divergence on that mixture picks a threshold for the whole tensor that clips the
# wide channels: 3.06 for MobileNetV2's first depthwise output, where 6.0 is the percentile's.
# With `--calibration entropy` MobileNetV2's mean cosine over 30 validation inputs was 0.908;
# entropy elsewhere and percentile here gives 0.998.
CHANNEL_METHODS = {"entropy": "percentile"}
# A value's per-channel ranges are trusted only where the calibration inputs agree on them
# (`settled_channels`): a channel whose largest |x| on one input is more than RANGE_JUMP times
# its largest on every other input has a range that the next input may well exceed, and at a
# per-channel scale it saturates where one scale per tensor would not. Trained networks' deep
# layers have such channels (features that only some images excite): EfficientNet-Lite1's
# depthwise outputs in blocks 16-20, calibrated on 48 photos, have 2.4-17% of their live
# channels so (blocks 0-15: at most 1.3%; the zoo's seeded MobileNetV2 on its 16 calibration
# inputs: at most 0.7%), and at per-channel scales those channels saturated on other photos
# (saturation noise up to 4% of the signal in blocks 17-19), taking int8 top-1 agreement with
# fp32 over 200 photos to 0.88 and mean cosine 0.949; one scale per tensor where more than
# UNSETTLED_FRACTION of the live channels jump (blocks 16-20): 0.97, cosine 0.996 (one scale on
# every depthwise output: 0.975, cosine 0.996; alpha 0.25 everywhere: 0.90, cosine 0.979).
RANGE_JUMP = 2.0
UNSETTLED_FRACTION = 0.02


def quantize(
    graph: Graph,
    calibration_inputs: Iterable[Mapping[str, np.ndarray]],
    method: str = DEFAULT_METHOD,
    overrides: Mapping[str, str] | None = None,
    per_channel: bool = True,
    rounding: str = DEFAULT_ROUNDING,
    bias_correction: bool = True,
    unsigned: bool = True,
    keep_float: Callable[[Graph, Node], bool] | None = None,
    stream_method: str | None = STREAM_METHOD,
) -> Graph:
    """The int8 graph of float `graph`, calibrated on `calibration_inputs` (dicts of graph inputs).

    `method` names the calibrator for every activation ("minmax", "percentile", "entropy", "mse");
    `overrides` maps value names to another calibrator for those values. With `per_channel`, the
    values that `channel_scaled_values` allows (depthwise convolution outputs read only by group-1
    convolutions) get one scale per channel (`channel_scales`). So do the values of
    residual-stream stages that `channel_scaled_streams` allows, with one profile per stage
    (`stream_channel_scales`). `rounding` is how weights become int8: "gptq"
    (compiler.quant.rounding, from the calibration inputs' second moments) for convolutions,
    "gptq-all" for every dense layer too, or "nearest". With `bias_correction`, each QConv/QGemm's
    bias is corrected on the calibration inputs (compiler.quant.bias). With `unsigned`, the values
    that `unsigned_values` allows (never negative, read only by unpadded convolutions) take 255
    steps with zero point -128 instead of 127 (compiler.quant.plan). The convolutions and
    dense layers of the cleaned graph for which `keep_float(graph, node)` holds stay float, with
    their Relu/Clip (`codesign run` keeps a shallow first convolution that runs on the host so).
    The values of a linear residual stream (`linear_stream_values`) are calibrated by
    `stream_method` (None: by `method`); `overrides` still come first.
    """
    calibrated = calibrate(graph, calibration_inputs, rounding)
    return quantize_calibrated(calibrated, method, overrides, per_channel, bias_correction, unsigned,
                               keep_float, stream_method)


@dataclass(frozen=True)
class Calibrated:
    """The cleaned float graph, the calibration inputs and their statistics, with the second
    moments of the layers that the weight rounding rounds by GPTQ (the rounding is decided
    here): what `quantize` computes before it decides anything else, so that
    `quantize_calibrated` can quantize one graph several ways (compiler.quant.sensitivity)."""

    graph: Graph
    inputs: list[Mapping[str, np.ndarray]]
    calibration: Calibration


def calibrate(graph: Graph, calibration_inputs: Iterable[Mapping[str, np.ndarray]],
              rounding: str = DEFAULT_ROUNDING) -> Calibrated:
    """`graph` cleaned (`simplify`) and calibrated on `calibration_inputs`, with the moments of
    every layer that `rounding` may round by GPTQ (the first MOMENT_INPUTS inputs)."""
    if rounding not in ROUNDINGS:
        raise QuantizationError(f"unknown weight rounding {rounding!r}; known: {', '.join(ROUNDINGS)}")
    g = simplify(graph)
    feeds = list(calibration_inputs)
    moment_inputs = min(len(feeds), MOMENT_INPUTS)
    plan = moment_plan(g, ROUNDINGS[rounding], moment_inputs)
    return Calibrated(g, feeds, collect(g, feeds, moments_for=plan, moment_inputs=moment_inputs))


def quantize_calibrated(
    calibrated: Calibrated,
    method: str = DEFAULT_METHOD,
    overrides: Mapping[str, str] | None = None,
    per_channel: bool = True,
    bias_correction: bool = True,
    unsigned: bool = True,
    keep_float: Callable[[Graph, Node], bool] | None = None,
    stream_method: str | None = STREAM_METHOD,
) -> Graph:
    """`quantize` from `calibrate`'s result, with the weight rounding calibrated for. A layer that
    cannot be quantized (a LayerQuantizationError: no multiply and shift applies its scale
    ratios, a bias that does not fit, ...) stays float, with a QuantizationWarning naming it and
    saying why, and the graph is planned again without it."""
    fallen: set[str] = set()

    def keep(g: Graph, node: Node) -> bool:
        return node.outputs[0] in fallen or bool(keep_float and keep_float(g, node))

    while True:
        plan = static_plan(calibrated, method, overrides, per_channel, bias_correction, unsigned, keep,
                           stream_method)
        try:
            return rewrite(calibrated.graph, plan)
        except LayerQuantizationError as exc:
            if exc.layer in fallen or exc.layer not in _layer_outputs(calibrated.graph):
                raise
            fallen.add(exc.layer)
            node = calibrated.graph.producer(exc.layer)
            name = node.name if node is not None and node.name else exc.layer
            warnings.warn(QuantizationWarning(f"layer {name} stays float on the host: {exc.reason}"),
                          stacklevel=2)


def _layer_outputs(graph: Graph) -> set[str]:
    return {n.outputs[0] for n in dense_layers(graph)}


def static_plan(
    calibrated: Calibrated,
    method: str = DEFAULT_METHOD,
    overrides: Mapping[str, str] | None = None,
    per_channel: bool = True,
    bias_correction: bool = True,
    unsigned: bool = True,
    keep_float: Callable[[Graph, Node], bool] | None = None,
    stream_method: str | None = STREAM_METHOD,
) -> Plan:
    """The plan (compiler.quant.plan) by which `quantize_calibrated` rewrites `calibrated.graph`:
    every calibrated activation's coding, the calibration, and the layers kept float; the
    arguments are `quantize`'s."""
    g, calibration = calibrated.graph, calibrated.calibration
    if stream_method is not None:
        overrides = {**{name: stream_method for name in linear_stream_values(g)}, **(overrides or {})}
    scales = activation_scales(g, calibration, method, overrides)
    kept = _kept_float(g, keep_float)
    channel: dict[str, np.ndarray] = {}
    stream: list[str] = []
    if per_channel:
        channel, stream = _per_channel(g, calibration, scales, kept, method, overrides)
    wide = frozenset(unsigned_values(g, kept) if unsigned else [])
    _widen(scales, channel, wide)
    correction = calibrated.inputs if bias_correction else []
    return Plan(codings(scales, channel, stream, wide), calibration=calibration, correction_inputs=correction,
                keep_float=kept)


def _per_channel(
    g: Graph, calibration: Calibration, scales: Mapping[str, float], kept: frozenset[str], method: str,
    overrides: Mapping[str, str] | None,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """The per-channel scales of the values that may take them (a stream stage's values' last,
    with their stage's profile), and the values of those stages."""
    names = channel_scaled_values(g, kept)
    channel = channel_scales(g, calibration, names, method, overrides)
    stages = channel_scaled_streams(g, linear_stream_values(g), kept)
    channel.update(stream_channel_scales(calibration, stages, scales))
    return channel, [name for stage in stages for name in stage]


def _widen(scales: dict[str, float], channel: dict[str, np.ndarray], unsigned: frozenset[str]) -> None:
    """Unsigned values take 255 steps from 0 to the threshold instead of 127: their scales (the
    per-channel ones where they have some) shrink by 127 / 255, in place."""
    for name in unsigned:
        if name in channel:
            channel[name] = _float32(channel[name] * INT8_MAX / UINT8_MAX)
        else:
            scales[name] = float(_float32(scales[name] * INT8_MAX / UINT8_MAX))


def linear_stream_values(graph: Graph) -> list[str]:
    """The feature maps of convolutional residual streams without activation (MobileNetV2's
    linear bottlenecks): the output of a 4-d Add of two activations, one of them computed by a
    convolution, that no Relu or Clip follows, and each of its inputs that a convolution
    computes (the stream as it enters a stage). Measured on MobileNetV2 only."""
    users = graph.consumer_map()
    found: list[str] = []
    for node in graph.nodes:
        values = [graph.values[x] for x in node.inputs]
        if node.op != "Add" or any(v.is_const or v.rank != 4 for v in values):
            continue
        after = users.get(node.outputs[0], [])
        if len(after) == 1 and after[0].op in ("Relu", "Clip"):
            continue  # rectified (ResNet's): the activation's output is the stream
        producers = (graph.producer(x) for x in node.inputs)
        convs = [p.outputs[0] for p in producers if p is not None and p.op == "Conv"]
        if convs:
            found += [v for v in (*convs, node.outputs[0]) if v not in found]
    return found


DENSE_OPS = ("Conv", "Gemm", "MatMul")


def dense_layers(graph: Graph) -> list[Node]:
    """The convolutions and dense layers of `graph`: what `quantize`'s `keep_float` chooses among."""
    return [n for n in graph.nodes if n.op in DENSE_OPS]


def _kept_float(graph: Graph, keep: Callable[[Graph, Node], bool] | None) -> frozenset[str]:
    if keep is None:
        return frozenset()
    return frozenset(n.outputs[0] for n in dense_layers(graph) if keep(graph, n))


def _float32(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def channel_scales(
    graph: Graph,
    calibration: Calibration,
    names: Iterable[str],
    method: str,
    overrides: Mapping[str, str] | None = None,
    alpha: float = CHANNEL_ALPHA,
) -> dict[str, np.ndarray]:
    """Per-channel scales (float32-exact) of the values `names`: channel c's threshold is the
    tensor's (its calibrator's amax) times (max_c / max) ** `alpha`, max_c the largest |x| of the
    channel on the calibration data, max the tensor's, floored at CHANNEL_FLOOR.

    The tensor's calibrator is `method` (CHANNEL_METHODS replaces entropy by percentile) unless
    `overrides` names one for the value. alpha = 0 is the per-tensor scale, alpha = 1 each
    channel's own range. The readers fold the scales into their weights (w'[k, c] =
    w[k, c] * s_c), where a small s_c makes column c coarse in the per-output-channel weight
    quantization: the exponent balances activation steps against weight steps, as SmoothQuant's
    migration strength does. Every channel's threshold is at least its calibrated max_c when the
    tensor's is the tensor's max, so a channel saturates between its own calibrated range and
    the tensor's. A value whose channel ranges the calibration inputs do not agree on
    (`settled_channels`) is left out: it keeps one scale per tensor."""
    overrides = dict(overrides or {})
    result = {}
    for name in names:
        stats = calibration.stats[name]
        per = stats.axis_absmax.get(1)
        if per is None or graph.values[name].rank != 4:
            raise QuantizationError(f"{name} has no per-channel statistics")
        whole = calibration.amax(name, overrides.get(name, CHANNEL_METHODS.get(method, method)))
        if whole <= 0 or stats.absmax <= 0 or not settled_channels(stats):
            continue  # never nonzero on the calibration data, or ranges it cannot tell: one scale
        ratio = np.maximum(per / stats.absmax, CHANNEL_FLOOR)
        result[name] = _float32(whole * ratio**alpha / INT8_MAX)
    return result


def settled_channels(stats: TensorStats, jump: float = RANGE_JUMP,
                     fraction: float = UNSETTLED_FRACTION) -> bool:
    """Whether the calibration inputs agree on the channel ranges (axis 1) of a value: at most
    `fraction` of its channels that were ever nonzero have a largest |x| on one input above
    `jump` times their largest on any other input (a channel nonzero on one input only jumps;
    so does every channel of a value calibrated on one input)."""
    top, runner_up = stats.axis_absmax.get(1), stats.axis_runner_up.get(1)
    if top is None or runner_up is None:
        return False
    live = top > 0
    jumps = top[live] > jump * runner_up[live]
    return bool(jumps.mean() <= fraction) if jumps.size else True


def stream_channel_scales(
    calibration: Calibration,
    stages: Iterable[list[str]],
    scales: Mapping[str, float],
    alpha: float = STREAM_ALPHA,
) -> dict[str, np.ndarray]:
    """Per-channel scales (float32-exact) of the values of residual-stream `stages`
    (compiler.quant.plan.channel_scaled_streams): value v's are scales[v] (its per-tensor
    scale) times the stage's profile p_c = (r_c / max r) ** `alpha`, floored at CHANNEL_FLOOR,
    r_c the largest share max_c(v) / max(v) of channel c over the stage's values. One profile
    per stage keeps every add's multipliers scalar. Where scales[v] is v's max over 127 (minmax,
    STREAM_METHOD), each channel's threshold is at least its own calibrated max."""
    result: dict[str, np.ndarray] = {}
    for stage in stages:
        shares = [calibration.stats[v].axis_absmax[1] / calibration.stats[v].absmax for v in stage
                  if calibration.stats[v].absmax > 0]
        if not shares:
            continue
        share = np.max(shares, axis=0)
        profile = np.maximum(share / share.max(), CHANNEL_FLOOR) ** alpha
        result.update((v, _float32(scales[v] * profile)) for v in stage)
    return result


def activation_scales(
    graph: Graph, calibration: Calibration, method: str, overrides: Mapping[str, str] | None = None
) -> dict[str, float]:
    """Scale (float32-exact) of every calibrated float activation of `graph` but its outputs."""
    overrides = dict(overrides or {})
    for name, m in [("*", method), *overrides.items()]:
        if m not in CALIBRATORS:
            raise QuantizationError(
                f"unknown calibration method {m!r} for {name}; known: {', '.join(CALIBRATORS)}"
            )
    unknown = sorted(set(overrides) - set(calibration.stats))
    if unknown:
        raise QuantizationError(f"override for {unknown[0]}, which is not a calibrated float activation")
    scales = {}
    for name in calibration.stats:
        if name in graph.outputs:
            continue
        amax = calibration.amax(name, overrides.get(name, method))
        scales[name] = float(np.float32((amax if amax > 0 else 1.0) / INT8_MAX))
    return scales
