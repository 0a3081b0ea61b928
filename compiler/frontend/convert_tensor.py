"""Converters of ONNX's data-movement, shape and constant ops. Every parameter ONNX may pass as
an attribute (older opsets) or as an input tensor (newer ones) becomes a resolved attribute."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import helper

from compiler.frontend.context import ImportContext
from compiler.frontend.convert_nn import _axis
from compiler.frontend.onnx_shapes import check_finite
from compiler.frontend.registry import converter
from compiler.graph.opdefs.tensor import clamp_slice


def _ints(data: object) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(data).reshape(-1))


def _attr_or_input(ctx: ImportContext, name: str, index: int) -> tuple[int, ...] | None:
    """Integer list parameter `name`: an attribute in older opsets, input `index` in newer."""
    if name in ctx.attrs:
        return _ints(ctx.attrs[name])
    data = ctx.param(index, name)
    return None if data is None else _ints(data)


def _axes(ctx: ImportContext, axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Axes made non-negative and sorted; duplicates are an error."""
    out = sorted(_axis(ctx, a, rank) for a in axes)
    if len(set(out)) != len(out):
        ctx.fail(f"axes {tuple(axes)} repeat an axis")
    return tuple(out)


@converter("Reshape", note="shape input resolved (0 and -1) into the exact output shape")
def _reshape(ctx: ImportContext) -> None:
    x = ctx.value(0)
    shape = _attr_or_input(ctx, "shape", 1)
    if shape is None:
        ctx.fail("has no shape")
    ctx.emit(
        "Reshape",
        [x.name],
        {"shape": _resolve_shape(ctx, x.shape, shape, bool(ctx.int_attr("allowzero", 0)))},
    )


def _resolve_shape(
    ctx: ImportContext, src: tuple[int, ...], shape: tuple[int, ...], allowzero: bool
) -> tuple[int, ...]:
    out = [src[i] if d == 0 and not allowzero and i < len(src) else d for i, d in enumerate(shape)]
    if out.count(-1) > 1 or min(out, default=0) < -1:
        ctx.fail(f"shape {shape} is not a valid Reshape target")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or math.prod(src) % known:
            ctx.fail(f"cannot reshape {src} to {shape}")
        out[out.index(-1)] = math.prod(src) // known
    if math.prod(out) != math.prod(src):
        ctx.fail(f"cannot reshape {src} to {shape}")
    return tuple(out)


@converter("Flatten", note="negative axis normalised")
def _flatten(ctx: ImportContext) -> None:
    x = ctx.value(0)
    axis = ctx.int_attr("axis", 1)
    ctx.emit("Flatten", [x.name], {"axis": axis + x.rank if axis < 0 else axis})


@converter("Squeeze", note="axes attribute (opset < 13) or input; absent axes = all size-1 axes")
def _squeeze(ctx: ImportContext) -> None:
    x = ctx.value(0)
    axes = _attr_or_input(ctx, "axes", 1)
    if axes is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    ctx.emit("Squeeze", [x.name], {"axes": _axes(ctx, axes, x.rank)})


@converter("Unsqueeze", note="axes attribute (opset < 13) or input")
def _unsqueeze(ctx: ImportContext) -> None:
    x = ctx.value(0)
    axes = _attr_or_input(ctx, "axes", 1)
    if axes is None:
        ctx.fail("has no axes")
    ctx.emit("Unsqueeze", [x.name], {"axes": _axes(ctx, axes, x.rank + len(axes))})


@converter("Transpose", note="default perm (reverse) made explicit")
def _transpose(ctx: ImportContext) -> None:
    x = ctx.value(0)
    ctx.emit("Transpose", [x.name], {"perm": ctx.ints_attr("perm", tuple(range(x.rank))[::-1])})


@converter("Concat")
def _concat(ctx: ImportContext) -> None:
    values = [ctx.value(i) for i in range(len(ctx.node.input))]
    ctx.emit(
        "Concat", [v.name for v in values], {"axis": _axis(ctx, ctx.int_attr("axis", 0), values[0].rank)}
    )


@converter("Gather", note="negative indices allowed")
def _gather(ctx: ImportContext) -> None:
    data, idx = ctx.value(0), ctx.value(1)
    axis = _axis(ctx, ctx.int_attr("axis", 0), data.rank)
    indices = ctx.evaluate(idx.name)
    if indices is not None and indices.size and axis < data.rank:  # constant indices: check now
        dim = data.shape[axis]
        bad = indices[(indices < -dim) | (indices >= dim)]
        if bad.size:
            ctx.fail(f"index {int(bad.flat[0])} is out of range for axis {axis} of size {dim}")
    ctx.emit("Gather", [data.name, idx.name], {"axis": axis})


@converter("Expand", note="shape input resolved into an attribute")
def _expand(ctx: ImportContext) -> None:
    shape = _attr_or_input(ctx, "shape", 1)
    ctx.emit("Expand", [ctx.value(0).name], {"shape": shape})


@converter("Slice", note="attributes (opset < 10) or inputs; bounds clamped, axes sorted")
def _slice(ctx: ImportContext) -> None:
    x = ctx.value(0)
    starts, ends = _attr_or_input(ctx, "starts", 1), _attr_or_input(ctx, "ends", 2)
    if starts is None or ends is None or len(starts) != len(ends):
        ctx.fail("needs starts and ends of equal length")
    axes = _attr_or_input(ctx, "axes", 3) or tuple(range(len(starts)))
    steps = _attr_or_input(ctx, "steps", 4) or (1,) * len(starts)
    if not len(axes) == len(steps) == len(starts) or 0 in steps:
        ctx.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} do not match")
    norm = [_axis(ctx, a, x.rank) for a in axes]
    if len(set(norm)) != len(norm):
        ctx.fail(f"axes {axes} repeat an axis")
    rows = sorted(
        (a, *clamp_slice(s, e, st, x.shape[a]), st)
        for a, s, e, st in zip(norm, starts, ends, steps, strict=True)
    )
    attrs = {k: tuple(r[i] for r in rows) for i, k in enumerate(("axes", "starts", "ends", "steps"))}
    ctx.emit("Slice", [x.name], attrs)


@converter("Pad", note="pads/value attributes (opset < 11) or inputs, axes input (opset 18+) expanded")
def _pad(ctx: ImportContext) -> None:
    x = ctx.value(0)
    pads = _attr_or_input(ctx, "pads", 1)
    if pads is None:
        ctx.fail("has no pads")
    value = ctx.float_attr("value", 0.0) if ctx.opset < 11 else _scalar(ctx.param(2, "constant_value"), 0.0)
    axes = ctx.param(3, "axes")
    if axes is not None:  # pads follow the order of `axes`, which need not be sorted
        pads = _pads_for_axes(ctx, pads, tuple(_axis(ctx, a, x.rank) for a in _ints(axes)), x.rank)
    if len(pads) != 2 * x.rank:
        ctx.fail(f"pads {pads} do not fit rank {x.rank}")
    ctx.emit("Pad", [x.name], {"pads": pads, "mode": ctx.str_attr("mode", "constant"), "value": value})


def _pads_for_axes(
    ctx: ImportContext, pads: tuple[int, ...], axes: tuple[int, ...], rank: int
) -> tuple[int, ...]:
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        ctx.fail(f"pads {pads} do not fit axes {axes}")
    full = [0] * (2 * rank)
    for j, a in enumerate(axes):
        full[a], full[a + rank] = pads[j], pads[j + len(axes)]
    return tuple(full)


def _scalar(data: np.ndarray | None, default: float) -> float:
    return default if data is None or data.size == 0 else float(data.reshape(-1)[0])


@converter("Shape", note="folded to a constant (shapes are static); start/end (opset 15+) normalised")
def _shape(ctx: ImportContext) -> None:
    x = ctx.value(0)
    clamp = lambda v: min(max(v + x.rank if v < 0 else v, 0), x.rank)
    start, end = clamp(ctx.int_attr("start", 0)), clamp(ctx.int_attr("end", x.rank))
    ctx.emit("Shape", [x.name], {"start": start, "end": max(start, end)})


@converter("Size", note="folded to a constant")
def _size(ctx: ImportContext) -> None:
    ctx.emit("Size", [ctx.value(0).name])


@converter(
    "Constant", becomes="(a constant value)", note="every value_* form; becomes a constant, not a node"
)
def _constant(ctx: ImportContext) -> None:
    for key, dtype in (
        ("value_float", "float32"),
        ("value_floats", "float32"),
        ("value_int", "int64"),
        ("value_ints", "int64"),
    ):
        if key in ctx.attrs:
            ctx.add_const(ctx.node.output[0], np.array(ctx.attrs[key], dtype=dtype))
            return
    value = ctx.attr("value")
    if not isinstance(value, np.ndarray):
        ctx.fail(f"only tensor and numeric constants are supported, not {sorted(ctx.attrs)}")
    ctx.dtype_of(_onnx_type(value))
    check_finite(value, ctx.where())
    ctx.add_const(ctx.node.output[0], value)


def _onnx_type(array: np.ndarray) -> int:
    try:
        return int(helper.np_dtype_to_tensor_dtype(array.dtype))
    except (KeyError, TypeError, ValueError):
        return 0


@converter("ConstantOfShape", note="the shape input resolved; folded to a constant")
def _constant_of_shape(ctx: ImportContext) -> None:
    shape = ctx.param(0, "shape")
    fill = ctx.attr("value")
    fill = np.zeros(1, np.float32) if fill is None else np.asarray(fill)
    ctx.dtype_of(_onnx_type(fill))
    value = fill.reshape(-1)[0].item()
    ctx.emit("ConstantOfShape", [], {"shape": _ints(shape), "value": float(value), "dtype": fill.dtype.name})


@converter("Cast", note="`to` becomes a numpy dtype name")
def _cast(ctx: ImportContext) -> None:
    ctx.emit("Cast", [ctx.value(0).name], {"to": ctx.dtype_of(ctx.int_attr("to", 0))})


def _reduce(ctx: ImportContext, op: str) -> None:
    x = ctx.value(0)
    axes = _attr_or_input(ctx, "axes", 1)
    if not axes:
        if ctx.int_attr("noop_with_empty_axes", 0):
            ctx.emit("Identity", [x.name])
            return
        axes = tuple(range(x.rank))
    ctx.emit(op, [x.name], {"axes": _axes(ctx, axes, x.rank), "keepdims": ctx.int_attr("keepdims", 1)})


def _reducer(op: str) -> None:
    def convert(ctx: ImportContext) -> None:
        _reduce(ctx, op)

    converter(op, note="axes attribute or input (opset 13/18+) made explicit; none = all axes")(convert)


for _op in ("ReduceMean", "ReduceSum", "ReduceMax"):
    _reducer(_op)
