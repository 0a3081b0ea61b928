"""Comparisons, logical ops, Where, ArgMax/ArgMin and Tile: what detection and OCR heads read
(masks, score thresholds, class indices) and what exporters write around them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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

Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _compare_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    same_dtype(values, (*NUMERIC, "bool"))
    return [TensorType(broadcast([v.shape for v in values]), "bool")]


def _compare(name: str, fn: Binary, summary: str) -> None:
    register(OpDef(name, (2, 2), _compare_rule, lambda xs, a: [np.asarray(fn(xs[0], xs[1]))], summary))


_compare("Equal", np.equal, "a == b (bool), broadcast")
_compare("Less", np.less, "a < b (bool), broadcast")
_compare("Greater", np.greater, "a > b (bool), broadcast")
_compare("LessOrEqual", np.less_equal, "a <= b (bool), broadcast")
_compare("GreaterOrEqual", np.greater_equal, "a >= b (bool), broadcast")


def _logic_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    same_dtype(values, ("bool",))
    return [TensorType(broadcast([v.shape for v in values]), "bool")]


def _logic(name: str, fn: Binary) -> None:
    register(OpDef(name, (2, 2), _logic_rule, lambda xs, a: [np.asarray(fn(xs[0], xs[1]))],
                   f"{name.lower()} of two bool tensors, broadcast"))


_logic("And", np.logical_and)
_logic("Or", np.logical_or)
_logic("Xor", np.logical_xor)
register(OpDef("Not", (1, 1), _logic_rule, lambda xs, a: [np.logical_not(xs[0])], "not x (bool)"))


def _where_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    cond, x, y = values
    check(cond.dtype == "bool", f"Where's condition is {cond.dtype}, not bool")
    dtype = same_dtype([x, y], (*NUMERIC, "bool"))
    return [TensorType(broadcast([cond.shape, x.shape, y.shape]), dtype)]


register(OpDef("Where", (3, 3), _where_rule, lambda xs, a: [np.asarray(np.where(*xs)).astype(xs[1].dtype)],
               "x where cond else y, broadcast"))


# -- ArgMax / ArgMin -----------------------------------------------------------------------------


def _arg_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    same_dtype(values)
    axis = attr_int(attrs, "axis")
    axis_in(axis, x.rank)
    shape = list(x.shape)
    if attrs["keepdims"]:
        shape[axis] = 1
    else:
        del shape[axis]
    return [TensorType(tuple(shape), "int64")]


def _arg(fn: Callable[..., np.ndarray]) -> Callable[[Sequence[np.ndarray], Attrs], list[np.ndarray]]:
    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x, axis = xs[0], attr_int(attrs, "axis")
        if attrs["select_last_index"]:  # the last of equal extremes: search the reversed axis
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        idx = np.asarray(idx, np.int64)
        return [np.expand_dims(idx, axis) if attrs["keepdims"] else idx]

    return run


_ARG_ATTRS = {"axis": AttrSpec("int", 0), "keepdims": AttrSpec("int", 1),
              "select_last_index": AttrSpec("int", 0)}
register(OpDef("ArgMax", (1, 1), _arg_rule, _arg(np.argmax), "index of the largest value along axis (int64)",
               _ARG_ATTRS))
register(OpDef("ArgMin", (1, 1), _arg_rule, _arg(np.argmin), "index of the smallest value along axis (int64)",
               _ARG_ATTRS))


# -- Tile ----------------------------------------------------------------------------------------


def _tile_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    reps = attr_ints(attrs, "repeats")
    check(len(reps) == x.rank and min(reps, default=1) >= 1,
          f"repeats {reps} do not fit rank {x.rank} (one positive count per axis)")
    return [TensorType(tuple(d * r for d, r in zip(x.shape, reps, strict=True)), x.dtype)]


register(OpDef("Tile", (1, 1), _tile_rule, lambda xs, a: [np.tile(xs[0], attr_ints(a, "repeats"))],
               "x repeated `repeats` times along each axis", {"repeats": AttrSpec("ints")}))
