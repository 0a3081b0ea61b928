"""The rewrite of convolutions and dense layers (compiler.quant.rewrite's handlers for Conv, Gemm
and MatMul): Conv (+ bias) and dense layers (canonical Gemm, or MatMul by a constant [K, N] plus
an Add of a constant bias; inputs of rank > 2 are flattened to [M, K] around the QGemm) become
QConv/QGemm with their requantization and the Relu/Clip that folds into them. An input with
per-channel scales is folded into the float weights, an unsigned input's offset into the bias,
and an unsigned output's zero point into the bias and the clip bounds, as compiler.quant.plan's
module doc says; weights are rounded by GPTQ where the calibration holds their second moments,
and each QConv's float mean is recorded for bias correction.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from compiler.graph.builder import append
from compiler.graph.ir import Node
from compiler.graph.opdefs.qops import INT8_MAX
from compiler.quant.bias import BiasTarget
from compiler.quant.calibrate import channel_axis
from compiler.quant.errors import LayerQuantizationError, QuantizationError
from compiler.quant.plan import UNSIGNED_OFFSET, Coding, lowers_to_qconv
from compiler.quant.requant import (
    QWeight,
    accumulator_bounds,
    bias_scale_floor,
    channel_requant,
    int32_bias,
    quantize_bias,
    quantize_weight,
)

RATIO_FLOOR = 2.0**-12

if TYPE_CHECKING:  # the rewrite calls these handlers; no import cycle at run time
    from compiler.quant.rewrite import Act, Rewrite


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


def _lower_dense(lw: Rewrite, d: _Dense) -> bool:
    """Emit `d` as a QConv/QGemm (with the Relu/Clip after it) and True; False where it stays
    float (kept float, or without a scale on either side or constant weights), which a reader of
    a value that cannot be dequantized may not: that is a QuantizationError. Its errors are
    LayerQuantizationErrors naming the layer (the quantizer then keeps it float and retries)."""
    if d.out in lw.plan.keep_float:
        return False
    try:
        return _lower(lw, d)
    except LayerQuantizationError:
        raise
    except QuantizationError as exc:
        raise LayerQuantizationError(d.out, str(exc)) from None


def _lower(lw: Rewrite, d: _Dense) -> bool:
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
    channels = w_float.shape[d.w_axis]
    out_scales = _output_channel_scales(lw, d, out, channels)
    s_outs = np.full(channels, s_out) if out_scales is None else np.asarray(out_scales, np.float64)
    qw = _weight(lw, d, w_float, s_in, s_outs)
    w_int = np.moveaxis(qw.data, qw.axis, 0) if qw.axis != 0 else qw.data
    acc_scale = s_in * qw.channel_scales(channels)
    bias = _bias(lw, d, acc_scale, channels)
    attrs = dict(d.attrs)
    if lw.unsigned(d.x):
        bias = _unsigned_input_bias(d, bias, w_int)
        if any(d.attrs["pads"]):  # type: ignore[arg-type]
            attrs["pad_value"] = -UNSIGNED_OFFSET  # the code of zero
    reals = acc_scale / (s_out if out_scales is None else np.asarray(out_scales, np.float64))
    observed = _observed(lw, d.out, acc_scale)
    bounds = accumulator_bounds(w_int, bias, reals, observed)
    offset = UNSIGNED_OFFSET if lw.unsigned(out) else 0
    mult, shift = channel_requant(reals, bounds + np.ceil(offset / reals), f"node {d.out} ({d.op})")
    lo, hi = (
        _channel_clip_bounds(lw, act, out, out_scales, offset)
        if out_scales is not None
        else lw.clip_bounds(act, s_out, offset)
    )
    offset_acc = np.zeros(channels)
    if offset:  # the codes are round(y / s) - offset: offset output steps less before the shift
        offset_acc = np.rint(offset * float(1 << shift) / mult.astype(np.float64))
        bias = int32_bias(bias.astype(np.float64) - offset_acc, f"node {d.out} ({d.op})")
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


def _output_channel_scales(lw: Rewrite, d: _Dense, out: str, channels: int) -> np.ndarray | None:
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
    lw: Rewrite, act: Act | None, out: str, scales: np.ndarray, offset: int = 0
) -> tuple[int, int]:
    """The clip of an output with per-channel scales: every channel's bounds must be the same integers."""
    bounds = {lw.clip_bounds(act, float(s), offset) for s in np.asarray(scales).reshape(-1)}
    if len(bounds) != 1:
        raise QuantizationError(
            f"{out}: its activation bounds are different integers at its channel scales {sorted(bounds)}"
        )
    return bounds.pop()


def _weight(lw: Rewrite, d: _Dense, w_float: np.ndarray, s_in: float, s_outs: np.ndarray) -> QWeight:
    """The layer's int8 weights: the plan's (a QDQ file's), else quantized here, with channel
    scales no smaller than its bias needs (`bias_scale_floor`) nor than `ratio_scale_floor`
    allows for output scales `s_outs`."""
    qw = lw.plan.weights.get(d.w)
    if qw is None:
        floor = ratio_scale_floor(w_float, d.w_axis, s_in, s_outs)
        bias = lw.const(d.bias) if d.bias is not None and d.bias not in lw.plan.biases else None
        if bias is not None:
            floor = np.maximum(floor, bias_scale_floor(bias.reshape(-1), s_in))
        return quantize_weight(w_float, d.w_axis, _moment(lw, d), floor)
    if qw.scales.size > 1 and qw.axis != d.w_axis:
        raise QuantizationError(
            f"node {d.out} ({d.op}): weight {d.w} is quantized per channel along axis {qw.axis}, "
            f"its output channels are axis {d.w_axis}"
        )
    return QWeight(qw.data, qw.scales, d.w_axis)


def ratio_scale_floor(w: np.ndarray, axis: int, s_in: float, s_outs: np.ndarray) -> np.ndarray:
    """The smallest weight scale per output channel at which the channel's requantization ratio
    (s_in * w_scale[k] / s_outs[k]) is at least RATIO_FLOOR times the layer's largest: one shift
    serves every channel, so a channel whose weights are almost zero (a folded batch norm's)
    would get multiplier 0 and lose its bias; at the floor its weights round to about zero,
    which is what they contribute at the output's scale, and its bias keeps its precision."""
    moved = np.moveaxis(np.asarray(w, np.float64), axis, 0)
    scales = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1, initial=0.0) / INT8_MAX
    reals = s_in * scales / s_outs
    return RATIO_FLOOR * reals.max(initial=0.0) * s_outs / s_in


def _moment(lw: Rewrite, d: _Dense) -> np.ndarray | None:
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


def _bias(lw: Rewrite, d: _Dense, acc_scale: np.ndarray, channels: int) -> np.ndarray:
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


def _channel_mean(lw: Rewrite, name: str) -> np.ndarray | None:
    """The float pre-activation's mean per channel on the calibration data, if calibrated."""
    cal = lw.plan.calibration
    stats = cal.stats.get(name) if cal is not None else None
    axis = channel_axis(lw.src.values[name].rank)
    return stats.axis_mean(axis) if stats is not None and axis in stats.axis_sum else None


def _observed(lw: Rewrite, name: str, acc_scale: np.ndarray) -> np.ndarray | None:
    """Largest |acc + bias| per channel on the calibration data (accumulator units), if calibrated."""
    cal = lw.plan.calibration
    stats = cal.stats.get(name) if cal is not None else None
    if stats is None:
        return None
    per = stats.axis_absmax.get(channel_axis(lw.src.values[name].rank))
    return None if per is None else per / acc_scale


def _emit_dense(
    lw: Rewrite, d: _Dense, out: str, consts: list[str], attrs: Mapping[str, object], s_out: float
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


def conv(lw: Rewrite, node: Node) -> bool:
    if not lowers_to_qconv(lw.src, node):
        return False
    bias = node.inputs[2] if len(node.inputs) == 3 else None
    attrs = {k: node.attrs[k] for k in ("strides", "pads", "group")}
    return _lower_dense(lw, _Dense("QConv", node.inputs[0], node.inputs[1], 0, bias, node.outputs[0], attrs))


def gemm(lw: Rewrite, node: Node) -> bool:
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


def matmul(lw: Rewrite, node: Node) -> bool:
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
