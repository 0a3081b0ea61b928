"""Data-movement ops (reshape, transpose, concat, gather, slice, pad, ...), shape queries and
reductions. Their parameters are attributes with every value resolved: a Reshape's `shape` is
the exact output shape, Slice bounds are clamped, axes are non-negative and sorted."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from compiler.graph.ir import Value, attr_int, attr_ints
from compiler.graph.opdefs.base import (
    NUMERIC,
    Attrs,
    AttrSpec,
    OpDef,
    TensorType,
    axis_in,
    broadcast,
    check,
    register,
    same_dtype,
)

ANY = NUMERIC + ("bool",)


_ints, _int = attr_ints, attr_int


def _sorted_axes(axes: Sequence[int], rank: int) -> None:
    check(list(axes) == sorted(set(axes)), f"axes {tuple(axes)} must be sorted and distinct")
    for a in axes:
        axis_in(a, rank)


# -- reshaping -----------------------------------------------------------------------------------


def _reshape_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    shape = _ints(attrs, "shape")
    check(min(shape, default=0) >= 0, f"shape {shape} must be resolved (no -1)")
    check(math.prod(shape) == x.size, f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    return [TensorType(shape, x.dtype)]


register(
    OpDef(
        "Reshape",
        (1, 1),
        _reshape_rule,
        lambda xs, a: [xs[0].reshape(_ints(a, "shape"))],
        "x with the exact output `shape` (0 and -1 resolved)",
        {"shape": AttrSpec("ints")},
    )
)


def _flatten_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    axis = _int(attrs, "axis")
    check(0 <= axis <= x.rank, f"axis {axis} is out of range for rank {x.rank}")
    return [TensorType((math.prod(x.shape[:axis]), math.prod(x.shape[axis:])), x.dtype)]


register(
    OpDef(
        "Flatten",
        (1, 1),
        _flatten_rule,
        lambda xs, a: [xs[0].reshape(math.prod(xs[0].shape[: _int(a, "axis")]), -1)],
        "2-D (dims before axis, dims from axis)",
        {"axis": AttrSpec("int", 1)},
    )
)


def _squeeze_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    axes = _ints(attrs, "axes")
    _sorted_axes(axes, x.rank)
    check(all(x.shape[a] == 1 for a in axes), f"cannot squeeze axes {axes} of {x.shape}")
    return [TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]


def _unsqueeze_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    dims = iter(shape)
    return tuple(1 if i in axes else next(dims) for i in range(len(shape) + len(axes)))


def _unsqueeze_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    axes = _ints(attrs, "axes")
    _sorted_axes(axes, x.rank + len(axes))
    return [TensorType(_unsqueeze_shape(x.shape, axes), x.dtype)]


register(
    OpDef(
        "Squeeze",
        (1, 1),
        _squeeze_rule,
        lambda xs, a: [np.squeeze(xs[0], _ints(a, "axes"))],
        "drop the listed size-1 axes",
        {"axes": AttrSpec("ints")},
    )
)
register(
    OpDef(
        "Unsqueeze",
        (1, 1),
        _unsqueeze_rule,
        lambda xs, a: [xs[0].reshape(_unsqueeze_shape(xs[0].shape, _ints(a, "axes")))],
        "insert size-1 axes at the listed output positions",
        {"axes": AttrSpec("ints")},
    )
)


def _transpose_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    perm = _ints(attrs, "perm")
    check(sorted(perm) == list(range(x.rank)), f"perm {perm} is not a permutation of {x.rank} axes")
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


register(
    OpDef(
        "Transpose",
        (1, 1),
        _transpose_rule,
        lambda xs, a: [np.transpose(xs[0], _ints(a, "perm"))],
        "permute axes by `perm`",
        {"perm": AttrSpec("ints")},
    )
)


def _expand_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    return [TensorType(broadcast([x.shape, _ints(attrs, "shape")]), x.dtype)]


register(
    OpDef(
        "Expand",
        (1, 1),
        _expand_rule,
        lambda xs, a: [np.broadcast_to(xs[0], broadcast([xs[0].shape, _ints(a, "shape")])).copy()],
        "broadcast x with `shape`",
        {"shape": AttrSpec("ints")},
    )
)


# -- joining, gathering, slicing, padding --------------------------------------------------------


def _concat_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    dtype = same_dtype(values, ANY)
    axis, first = _int(attrs, "axis"), values[0].shape
    axis_in(axis, len(first))
    for v in values[1:]:
        check(
            v.rank == len(first)
            and all(d == e for i, (d, e) in enumerate(zip(v.shape, first, strict=True)) if i != axis),
            f"cannot concatenate {v.shape} to {first} on axis {axis}",
        )
    total = sum(v.shape[axis] for v in values)
    return [TensorType(first[:axis] + (total,) + first[axis + 1 :], dtype)]


register(
    OpDef(
        "Concat",
        (1, None),
        _concat_rule,
        lambda xs, a: [np.concatenate(xs, axis=_int(a, "axis"))],
        "join along `axis`",
        {"axis": AttrSpec("int")},
    )
)


def _gather_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    data, idx = values
    axis = _int(attrs, "axis")
    axis_in(axis, data.rank)
    check(idx.dtype in ("int32", "int64"), f"indices have dtype {idx.dtype}, not int32/int64")
    return [TensorType(data.shape[:axis] + idx.shape + data.shape[axis + 1 :], data.dtype)]


def _gather(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    data, idx = xs
    axis = _int(attrs, "axis")
    dim = data.shape[axis]
    if np.any((idx < -dim) | (idx >= dim)):
        raise IndexError(f"Gather index out of range [{-dim}, {dim})")
    return [np.take(data, np.where(idx < 0, idx + dim, idx), axis=axis)]


register(
    OpDef(
        "Gather",
        (2, 2),
        _gather_rule,
        _gather,
        "take indices (negative from the end) along `axis`",
        {"axis": AttrSpec("int", 0)},
    )
)


def clamp_slice(start: int | None, end: int | None, step: int, dim: int) -> tuple[int, int]:
    """ONNX/Python slice bounds made explicit for an axis of size `dim`: start and end in range,
    end -1 meaning "past the first element" when stepping backwards."""
    s, e, _ = slice(start, end, step).indices(dim)
    return s, e


def _slice_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    starts, ends, axes, steps = (_ints(attrs, k) for k in ("starts", "ends", "axes", "steps"))
    check(len(starts) == len(ends) == len(axes) == len(steps), "starts, ends, axes, steps lengths differ")
    _sorted_axes(axes, x.rank)
    shape = list(x.shape)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        check(
            st != 0 and clamp_slice(s, e if e >= 0 else None, st, x.shape[a]) == (s, e),
            f"slice {s}:{e}:{st} on axis {a} (size {x.shape[a]}) is not clamped",
        )
        shape[a] = len(range(s, e, st))
    return [TensorType(tuple(shape), x.dtype)]


def _slice(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    index = [slice(None)] * xs[0].ndim
    for s, e, a, st in zip(*(_ints(attrs, k) for k in ("starts", "ends", "axes", "steps")), strict=True):
        index[a] = slice(s, None if e < 0 else e, st)
    return [xs[0][tuple(index)].copy()]


register(
    OpDef(
        "Slice",
        (1, 1),
        _slice_rule,
        _slice,
        "python slicing start:end:step on `axes`, bounds clamped (end -1 = before 0 for step < 0)",
        {k: AttrSpec("ints") for k in ("starts", "ends", "axes", "steps")},
    )
)


_PAD_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {
    "reflect": "reflect",
    "edge": "edge",
    "wrap": "wrap",
}


def _pad_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    pads = _ints(attrs, "pads")
    check(len(pads) == 2 * x.rank, f"pads {pads} for rank {x.rank}")
    check(attrs["mode"] in ("constant", "reflect", "edge", "wrap"), f"pad mode {attrs['mode']}")
    shape = tuple(d + pads[i] + pads[i + x.rank] for i, d in enumerate(x.shape))
    check(min(shape, default=0) >= 0, f"pads {pads} remove more than {x.shape}")
    return [TensorType(shape, x.dtype)]


def _pad(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, pads, rank = xs[0], _ints(attrs, "pads"), xs[0].ndim
    # negative pads crop first; numpy pads the rest
    crop = tuple(slice(max(0, -pads[i]), d - max(0, -pads[i + rank])) for i, d in enumerate(x.shape))
    widths = [(max(0, pads[i]), max(0, pads[i + rank])) for i in range(rank)]
    mode = str(attrs["mode"])
    if mode == "constant":
        return [np.pad(x[crop], widths, constant_values=np.array(attrs["value"]).astype(x.dtype))]
    return [np.pad(x[crop], widths, mode=_PAD_MODES[mode])]


register(
    OpDef(
        "Pad",
        (1, 1),
        _pad_rule,
        _pad,
        "pad (begins then ends; negative crops) with mode constant (value) | reflect | edge | wrap",
        {"pads": AttrSpec("ints"), "mode": AttrSpec("str", "constant"), "value": AttrSpec("float", 0.0)},
    )
)


# -- shapes and constants ------------------------------------------------------------------------


def _shape_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    start, end = _int(attrs, "start"), _int(attrs, "end")
    check(0 <= start <= x.rank and 0 <= end <= x.rank, f"start {start}, end {end} for rank {x.rank}")
    return [TensorType((max(0, end - start),), "int64")]


register(
    OpDef(
        "Shape",
        (1, 1),
        _shape_rule,
        lambda xs, a: [np.array(xs[0].shape[_int(a, "start") : _int(a, "end")], dtype=np.int64)],
        "dims start..end of x's shape, int64",
        {"start": AttrSpec("int", 0), "end": AttrSpec("int")},
        shape_only=True,
    )
)
register(
    OpDef(
        "Size",
        (1, 1),
        lambda vs, a: [TensorType((), "int64")],
        lambda xs, a: [np.array(xs[0].size, dtype=np.int64)],
        "element count of x, int64",
        shape_only=True,
    )
)


def _const_of_shape_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    shape = _ints(attrs, "shape")
    check(min(shape, default=0) >= 0, f"shape {shape} has a negative dimension")
    check(attrs["dtype"] in ANY, f"dtype {attrs['dtype']} is not supported")
    return [TensorType(shape, str(attrs["dtype"]))]


register(
    OpDef(
        "ConstantOfShape",
        (0, 0),
        _const_of_shape_rule,
        lambda xs, a: [np.full(_ints(a, "shape"), a["value"], dtype=str(a["dtype"]))],
        "a tensor of `shape` filled with `value` of `dtype`",
        {"shape": AttrSpec("ints"), "value": AttrSpec("float", 0.0), "dtype": AttrSpec("str", "float32")},
    )
)


# -- reductions ----------------------------------------------------------------------------------


def _reduce_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    axes = _ints(attrs, "axes")
    check(len(axes) > 0, "reduction over no axes (the frontend writes Identity)")
    _sorted_axes(axes, x.rank)
    check(x.dtype in NUMERIC, f"dtype {x.dtype} is not supported")
    keep = bool(attrs["keepdims"])
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    return [TensorType(shape, x.dtype)]


def _reduction(name: str, fn: str, summary: str) -> None:
    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x, axes, keep = xs[0], _ints(attrs, "axes"), bool(attrs["keepdims"])
        wide = x.astype(np.float64) if x.dtype.kind == "f" and fn != "max" else x
        return [getattr(np, fn)(wide, axis=axes, keepdims=keep).astype(x.dtype)]

    register(
        OpDef(
            name,
            (1, 1),
            _reduce_rule,
            run,
            summary,
            {"axes": AttrSpec("ints"), "keepdims": AttrSpec("int", 1)},
        )
    )


_reduction("ReduceMean", "mean", "mean over `axes` (explicit, sorted)")
_reduction("ReduceSum", "sum", "sum over `axes` (explicit, sorted)")
_reduction("ReduceMax", "max", "maximum over `axes` (explicit, sorted)")
