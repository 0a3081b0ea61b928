"""Vision ops beyond the classifiers': ConvTranspose, Resize (nearest and linear), LRN,
InstanceNormalization, PRelu. Canonical forms: ConvTranspose's output_shape and auto_pad are
resolved into pads (which may be negative: extra output) by the frontend; Resize carries its
output shape (`sizes`) and the per-axis scales its coordinate transform divides by."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compiler.graph.ir import Value, attr_int, attr_ints, attr_str
from compiler.graph.opdefs.base import (
    FLOATS,
    OPS,
    Attrs,
    AttrSpec,
    OpDef,
    TensorType,
    broadcast,
    check,
    register,
    same_dtype,
)

# -- ConvTranspose -------------------------------------------------------------------------------


def transpose_out(size: int, kernel: int, stride: int, dilation: int, pad_total: int, extra: int) -> int:
    """ONNX's output length of a transposed convolution."""
    return stride * (size - 1) + extra + (kernel - 1) * dilation + 1 - pad_total


def _conv_transpose_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, w, *b = values
    dtype = same_dtype(values, FLOATS)
    g, rank = attr_int(attrs, "group"), x.rank - 2
    check(x.rank >= 3 and w.rank == x.rank, f"input {x.shape} and weight {w.shape} ranks")
    check(g >= 1 and w.shape[0] == x.shape[1] and x.shape[1] % g == 0,
          f"weight {w.shape} does not fit {x.shape[1]} input channels in {g} groups")
    m = w.shape[1] * g
    check(not b or b[0].shape == (m,), f"bias {b[0].shape if b else ()} is not ({m},)")
    strides, dil = attr_ints(attrs, "strides"), attr_ints(attrs, "dilations")
    pads, extra = attr_ints(attrs, "pads"), attr_ints(attrs, "output_padding")
    check(len(strides) == len(dil) == len(extra) == rank and len(pads) == 2 * rank,
          f"strides {strides}, dilations {dil}, pads {pads}, output_padding {extra} for {rank} spatial dims")
    check(min(strides + dil) >= 1, f"strides {strides} and dilations {dil} must be positive")
    out = tuple(transpose_out(x.shape[2 + i], w.shape[2 + i], strides[i], dil[i], pads[i] + pads[i + rank],
                              extra[i]) for i in range(rank))
    check(min(out) >= 1, f"output {out} is empty")
    return [TensorType((x.shape[0], w.shape[1] * g, *out), dtype)]


def _conv_transpose(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    """As a stride-1 convolution: the input dilated by the strides (zeros between), padded by
    dilation * (kernel - 1) less the pads (cropped where that is negative), with the weights
    flipped and each group's in/out channels swapped."""
    x, w, *b = xs
    g, rank = attr_int(attrs, "group"), x.ndim - 2
    strides, dil = attr_ints(attrs, "strides"), attr_ints(attrs, "dilations")
    pads, extra = attr_ints(attrs, "pads"), attr_ints(attrs, "output_padding")
    kernel = w.shape[2:]
    dilated = ((n - 1) * s + 1 for n, s in zip(x.shape[2:], strides, strict=True))
    z = np.zeros((*x.shape[:2], *dilated), x.dtype)
    z[(slice(None), slice(None), *(slice(None, None, s) for s in strides))] = x
    for i in range(rank):
        span = dil[i] * (kernel[i] - 1)
        z = _pad_axis(z, 2 + i, span - pads[i], span - pads[i + rank] + extra[i])
    c, mg = w.shape[0], w.shape[1]
    wc = w.reshape(g, c // g, mg, *kernel).swapaxes(1, 2).reshape(g * mg, c // g, *kernel)
    wc = np.ascontiguousarray(np.flip(wc, tuple(range(2, 2 + rank))))
    conv: Attrs = {"strides": (1,) * rank, "pads": (0,) * (2 * rank), "dilations": dil, "group": g}
    return OPS["Conv"].evaluate([z, wc, *b], conv)


def _pad_axis(x: np.ndarray, axis: int, before: int, after: int) -> np.ndarray:
    """`x` with zeros added (or elements cut, where negative) at both ends of `axis`."""
    n = x.shape[axis]
    x = np.take(x, range(max(0, -before), n - max(0, -after)), axis=axis)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (max(0, before), max(0, after))
    return np.pad(x, widths)


register(OpDef("ConvTranspose", (2, 3), _conv_transpose_rule, _conv_transpose,
               "transposed convolution of NC* data with C(M/g)* weights, optional bias; any group count",
               {"strides": AttrSpec("ints"), "pads": AttrSpec("ints"), "dilations": AttrSpec("ints"),
                "output_padding": AttrSpec("ints"), "group": AttrSpec("int", 1)}))


# -- Resize --------------------------------------------------------------------------------------

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    sizes, scales = attr_ints(attrs, "sizes"), attrs["scales"]
    assert isinstance(scales, tuple)
    check(len(sizes) == len(scales) == x.rank and min(sizes, default=1) >= 1,
          f"sizes {sizes} and scales {scales} do not fit rank {x.rank}")
    mode = attr_str(attrs, "mode")
    check(mode in ("nearest", "linear"), f"mode {mode!r} is not nearest or linear")
    check(attr_str(attrs, "coordinate_transformation_mode") in COORDINATE_MODES,
          f"coordinate_transformation_mode {attrs['coordinate_transformation_mode']!r} is not supported")
    check(attr_str(attrs, "nearest_mode") in NEAREST_MODES, f"nearest_mode {attrs['nearest_mode']!r} unknown")
    return [TensorType(sizes, same_dtype(values))]


def source_coords(i: np.ndarray, n_in: int, n_out: int, scale: float, mode: str) -> np.ndarray:
    """ONNX Resize's coordinate transform: the input coordinate of each output index `i`."""
    if mode == "align_corners":  # over the unrounded length scale * n_in, as ONNX's reference does
        return i * ((n_in - 1) / (scale * n_in - 1)) if n_out > 1 else np.zeros_like(i)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    if mode == "pytorch_half_pixel" and n_out == 1:
        return np.zeros_like(i)
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / (scale * n_in))
        return offset + (i + 0.5) / scale - 0.5
    return (i + 0.5) / scale - 0.5  # half_pixel, pytorch_half_pixel


def _nearest(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    return np.floor(x) if mode == "floor" else np.ceil(x)


def nearest_index(attrs: Attrs, axis: int, n_in: int) -> np.ndarray:
    """The input index each output index of `axis` reads, for a nearest Resize."""
    sizes, scales = attr_ints(attrs, "sizes"), attrs["scales"]
    assert isinstance(scales, tuple)
    n_out = sizes[axis]
    src = source_coords(np.arange(n_out, dtype=np.float64), n_in, n_out, float(scales[axis]),
                        attr_str(attrs, "coordinate_transformation_mode"))
    return np.clip(_nearest(src, attr_str(attrs, "nearest_mode")), 0, n_in - 1).astype(np.int64)


def _resize(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    """Separable: one axis at a time (n-linear interpolation is linear along each axis in turn)."""
    x = xs[0]
    sizes, scales = attr_ints(attrs, "sizes"), attrs["scales"]
    assert isinstance(scales, tuple)
    mode, coord = attr_str(attrs, "mode"), attr_str(attrs, "coordinate_transformation_mode")
    y = x.astype(np.float64) if mode == "linear" else x
    for axis, (n_in, n_out, scale) in enumerate(zip(x.shape, sizes, scales, strict=True)):
        if n_in == n_out and scale == 1.0:
            continue
        if mode == "nearest":
            y = np.take(y, nearest_index(attrs, axis, n_in), axis=axis)
            continue
        src = source_coords(np.arange(n_out, dtype=np.float64), n_in, n_out, float(scale), coord)
        src = np.clip(src, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        frac = (src - lo).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
        y = np.take(y, lo, axis=axis) * (1 - frac) + np.take(y, hi, axis=axis) * frac
    return [np.asarray(y).astype(x.dtype)]


register(OpDef("Resize", (1, 1), _resize_rule, _resize,
               "nearest or n-linear resampling to `sizes`, ONNX's coordinate transforms",
               {"mode": AttrSpec("str", "nearest"),
                "coordinate_transformation_mode": AttrSpec("str", "half_pixel"),
                "nearest_mode": AttrSpec("str", "round_prefer_floor"), "sizes": AttrSpec("ints"),
                "scales": AttrSpec("floats")}))


# -- normalisations and PRelu --------------------------------------------------------------------


def _lrn_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    check(x.rank >= 3, f"LRN needs NC* data, not {x.shape}")
    check(attr_int(attrs, "size") >= 1, f"size {attrs['size']} must be positive")
    return [TensorType(x.shape, same_dtype(values, FLOATS))]


def _lrn(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    """x / (bias + alpha / size * (sum of x^2 over the `size` nearest channels)) ** beta."""
    x = xs[0]
    size = attr_int(attrs, "size")
    alpha, beta, bias = (float(attrs[k]) for k in ("alpha", "beta", "bias"))  # type: ignore[arg-type]
    sq = np.square(x.astype(np.float64))
    lo, hi = (size - 1) // 2, math.ceil((size - 1) / 2)
    padded = _pad_axis(sq, 1, lo, hi)
    csum = np.concatenate([np.zeros_like(padded[:, :1]), np.cumsum(padded, axis=1)], axis=1)
    window = csum[:, size:] - csum[:, : x.shape[1]]
    return [(x / (bias + alpha / size * window) ** beta).astype(x.dtype)]


register(OpDef("LRN", (1, 1), _lrn_rule, _lrn, "local response normalisation across channels",
               {"size": AttrSpec("int"), "alpha": AttrSpec("float", 1e-4), "beta": AttrSpec("float", 0.75),
                "bias": AttrSpec("float", 1.0)}))


def _instance_norm_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, scale, bias = values
    dtype = same_dtype(values, FLOATS)
    check(x.rank >= 3 and scale.shape == bias.shape == (x.shape[1],),
          f"scale {scale.shape} and bias {bias.shape} must be ({x.shape[1]},) for input {x.shape}")
    return [TensorType(x.shape, dtype)]


def _instance_norm(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, scale, bias = xs
    axes = tuple(range(2, x.ndim))
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    var = np.square(wide - mean).mean(axis=axes, keepdims=True)
    per_c = (-1,) + (1,) * (x.ndim - 2)
    y = (wide - mean) / np.sqrt(var + float(attrs["epsilon"]))  # type: ignore[arg-type]
    return [(y * scale.reshape(per_c) + bias.reshape(per_c)).astype(x.dtype)]


register(OpDef("InstanceNormalization", (3, 3), _instance_norm_rule, _instance_norm,
               "per sample and channel: (x - mean) / sqrt(var + epsilon) * scale + bias",
               {"epsilon": AttrSpec("float", 1e-5)}))


def _prelu_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, slope = values
    dtype = same_dtype(values, FLOATS)
    check(broadcast([x.shape, slope.shape]) == x.shape,
          f"slope {slope.shape} does not broadcast to {x.shape}")
    return [TensorType(x.shape, dtype)]


register(OpDef("PRelu", (2, 2), _prelu_rule,
               lambda xs, a: [np.where(xs[0] < 0, xs[0] * xs[1], xs[0]).astype(xs[0].dtype)],
               "x where x >= 0, else slope * x (slope broadcast to x)"))
