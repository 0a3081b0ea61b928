"""Converters of the operators detection, OCR and older classification networks add to the
classifiers' set: ConvTranspose, Resize/Upsample, LRN, InstanceNormalization, PRelu, Split,
Tile, ArgMax/ArgMin, Where, the comparisons and the logical ops."""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.context import ImportContext
from compiler.frontend.convert_nn import _axis
from compiler.frontend.registry import converter
from compiler.graph.opdefs.tensor import clamp_slice


def _ints(data: object) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(data).reshape(-1))


def _passthrough(op: str, attrs: dict[str, float] | None = None, note: str = "") -> None:
    """A converter passing every input through, float attributes copied with their defaults."""

    def convert(ctx: ImportContext) -> None:
        values = {k: ctx.float_attr(k, d) for k, d in (attrs or {}).items()}
        ctx.emit(op, [ctx.value(i).name for i in range(len(ctx.node.input))], values)

    converter(op, note=note)(convert)


for _op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
    _passthrough(_op, note="bool result")
for _op in ("And", "Or", "Xor", "Not"):
    _passthrough(_op, note="bool tensors")
_passthrough("Where", note="bool condition, broadcast")
_passthrough("InstanceNormalization", {"epsilon": 1e-5})


@converter("PRelu", note="slope broadcast to the input; a (C,) slope that does not broadcast is per "
           "channel (opset < 7's rule, kept by upgraded models)")
def _prelu(ctx: ImportContext) -> None:
    x, slope = ctx.value(0), ctx.value(1)
    name = slope.name
    per_channel = x.rank >= 3 and slope.shape == (x.shape[1],) and slope.shape[0] not in (1, x.shape[-1])
    if per_channel:
        shape = (x.shape[1],) + (1,) * (x.rank - 2)
        name = ctx.emit("Reshape", [slope.name], {"shape": shape}, output=ctx.temp("slope"))
    ctx.emit("PRelu", [x.name, name])


@converter("LRN", note="across channels; size required")
def _lrn(ctx: ImportContext) -> None:
    attrs = {"size": ctx.int_attr("size", 0), "alpha": ctx.float_attr("alpha", 1e-4),
             "beta": ctx.float_attr("beta", 0.75), "bias": ctx.float_attr("bias", 1.0)}
    ctx.emit("LRN", [ctx.value(0).name], attrs)


def _arg(op: str) -> None:
    def convert(ctx: ImportContext) -> None:
        x = ctx.value(0)
        attrs = {"axis": _axis(ctx, ctx.int_attr("axis", 0), x.rank), "keepdims": ctx.int_attr("keepdims", 1),
                 "select_last_index": ctx.int_attr("select_last_index", 0)}
        ctx.emit(op, [x.name], attrs)

    converter(op, note="negative axis normalised; select_last_index")(convert)


_arg("ArgMax")
_arg("ArgMin")


@converter("Tile", note="repeats input resolved into an attribute")
def _tile(ctx: ImportContext) -> None:
    repeats = ctx.param(1, "repeats")
    ctx.emit("Tile", [ctx.value(0).name], {"repeats": _ints(repeats)})


@converter("Split", becomes="Slice", note="split attribute (opset < 13), input, or num_outputs (18+); "
           "each output a Slice")
def _split(ctx: ImportContext) -> None:
    x = ctx.value(0)
    axis = _axis(ctx, ctx.int_attr("axis", 0), x.rank)
    outputs = list(ctx.node.output)
    n = x.shape[axis]
    if "split" in ctx.attrs:
        sizes = _ints(ctx.attrs["split"])
    elif (given := ctx.param(1, "split")) is not None:
        sizes = _ints(given)
    else:
        parts = ctx.int_attr("num_outputs", len(outputs))
        step = -(-n // parts)
        sizes = tuple(min(step, n - i * step) for i in range(parts))
    if len(sizes) != len(outputs) or sum(sizes) != n or min(sizes, default=0) < 0:
        ctx.fail(f"split sizes {sizes} do not cut axis {axis} ({n}) into {len(outputs)} outputs")
    start = 0
    for name, size in zip(outputs, sizes, strict=True):
        begin, end = clamp_slice(start, start + size, 1, n)
        if name:
            ctx.emit("Slice", [x.name], {"axes": (axis,), "starts": (begin,), "ends": (end,), "steps": (1,)},
                     output=name)
        start += size


# -- ConvTranspose -------------------------------------------------------------------------------


@converter("ConvTranspose", note="any group count; output_shape and auto_pad resolved into pads")
def _conv_transpose(ctx: ImportContext) -> None:
    x, w = ctx.value(0), ctx.value(1)
    kernel, rank = w.shape[2:], x.rank - 2
    if ctx.ints_attr("kernel_shape", kernel) != kernel:
        ctx.fail(f"kernel_shape {ctx.attrs['kernel_shape']} differs from the weight's {kernel}")
    strides, dil = ctx.ints_attr("strides", (1,) * rank), ctx.ints_attr("dilations", (1,) * rank)
    extra = ctx.ints_attr("output_padding", (0,) * rank)
    if not len(strides) == len(dil) == len(extra) == rank:
        ctx.fail(f"strides {strides}, dilations {dil}, output_padding {extra} do not fit kernel {kernel}")
    auto = ctx.str_attr("auto_pad", "NOTSET")
    out_shape = ctx.ints_attr("output_shape", ())[-rank:] if "output_shape" in ctx.attrs else ()
    if not out_shape and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = tuple(n * s for n, s in zip(x.shape[2:], strides, strict=True))
    if out_shape:
        rows = zip(x.shape[2:], kernel, strides, dil, extra, out_shape, strict=True)
        totals = [s * (n - 1) + e + (k - 1) * d + 1 - o for n, k, s, d, e, o in rows]
        upper = auto == "SAME_UPPER"
        pads = tuple([t // 2 if upper else t - t // 2 for t in totals]
                     + [t - t // 2 if upper else t // 2 for t in totals])
    elif auto == "VALID":
        pads = (0,) * (2 * rank)
    else:
        pads = ctx.ints_attr("pads", (0,) * (2 * rank))
    inputs = [x.name, w.name] + ([b] if (b := ctx.input(2)) else [])
    ctx.emit("ConvTranspose", inputs, {"strides": strides, "dilations": dil, "pads": pads,
                                       "output_padding": extra, "group": ctx.int_attr("group", 1)})


# -- Resize / Upsample ---------------------------------------------------------------------------


@converter("Resize", note="nearest (every nearest_mode) and linear; half_pixel, half_pixel_symmetric, "
           "pytorch_half_pixel, align_corners, asymmetric; sizes or scales, axes, keep_aspect_ratio_policy")
def _resize(ctx: ImportContext) -> None:
    if ctx.opset < 11:
        _resample(ctx, ctx.param(1, "scales"), None, "asymmetric", "floor")
        return
    scales, sizes = ctx.param(2, "scales"), ctx.param(3, "sizes")
    coord = ctx.str_attr("coordinate_transformation_mode", "half_pixel")
    _resample(ctx, scales, sizes, coord, ctx.str_attr("nearest_mode", "round_prefer_floor"))


@converter("Upsample", becomes="Resize", note="opset 9 (deprecated after): asymmetric coordinates, floor")
def _upsample(ctx: ImportContext) -> None:
    _resample(ctx, ctx.param(1, "scales"), None, "asymmetric", "floor")


def _resample(ctx: ImportContext, scales: np.ndarray | None, sizes: np.ndarray | None, coord: str,
              nearest: str) -> None:
    x = ctx.value(0)
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(m := ctx.str_attr("mode", "nearest"), m)
    if mode not in ("nearest", "linear"):
        ctx.fail(f"mode {mode!r} is not supported (nearest, linear)")
    if ctx.int_attr("antialias", 0):
        ctx.fail("antialias=1 is not supported")
    if coord == "tf_crop_and_resize":
        ctx.fail("coordinate_transformation_mode 'tf_crop_and_resize' is not supported")
    axes = tuple(_axis(ctx, a, x.rank) for a in ctx.ints_attr("axes", tuple(range(x.rank))))
    full_scale, full_size = [1.0] * x.rank, list(x.shape)
    if sizes is not None and sizes.size:
        given = _ints(sizes)
        if len(given) != len(axes):
            ctx.fail(f"sizes {given} do not fit axes {axes}")
        policy = ctx.str_attr("keep_aspect_ratio_policy", "stretch")
        ratios = [s / x.shape[a] for a, s in zip(axes, given, strict=True)]
        if policy != "stretch":
            common = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [common] * len(axes)
            given = tuple(math.floor(common * x.shape[a] + 0.5) for a in axes)
        for a, n, r in zip(axes, given, ratios, strict=True):
            full_size[a], full_scale[a] = n, r
    elif scales is not None and scales.size:
        given_scales = [float(s) for s in np.asarray(scales, np.float32).reshape(-1)]
        if len(given_scales) != len(axes) or min(given_scales) <= 0:
            ctx.fail(f"scales {given_scales} do not fit axes {axes} (one positive scale each)")
        for a, f in zip(axes, given_scales, strict=True):
            full_size[a], full_scale[a] = math.floor(x.shape[a] * f), f
    else:
        ctx.fail("needs scales or sizes")
    ctx.emit("Resize", [x.name], {"mode": mode, "coordinate_transformation_mode": coord,
                                  "nearest_mode": nearest, "sizes": tuple(full_size),
                                  "scales": tuple(full_scale)})
