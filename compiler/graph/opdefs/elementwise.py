"""Element-wise ops: activations, broadcasting arithmetic, casts and pass-throughs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from compiler.graph.ir import Value, attr_float
from compiler.graph.opdefs.base import (
    FLOATS,
    NUMERIC,
    Attrs,
    AttrSpec,
    OpDef,
    TensorType,
    broadcast,
    check,
    in_float64,
    register,
    same_dtype,
    unary_same,
)

_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.asarray(_ERF(x), dtype=np.float64)


def _gelu64(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)))


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(alpha * x + beta, 0, 1).astype(x.dtype)


def _clip(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    lo, hi = attr_float(attrs, "min"), attr_float(attrs, "max")
    if x.dtype.kind in "iu":  # integer bounds beyond the dtype's range do not constrain
        info = np.iinfo(x.dtype)
        lo, hi = max(lo, info.min), min(hi, info.max)
    # np.minimum(np.maximum(...)) rather than np.clip: ONNX gives max when min > max.
    y = np.maximum(x, np.array(lo).astype(x.dtype))
    return np.minimum(y, np.array(hi).astype(x.dtype), out=y if y.ndim else None)  # in place: a new array


def _unary(
    name: str, fn: Callable[[np.ndarray], np.ndarray], summary: str, allowed: Sequence[str] = FLOATS
) -> None:
    register(
        OpDef(name, (1, 1), partial(unary_same, allowed=allowed), lambda xs, attrs: [fn(xs[0])], summary)
    )


_unary("Relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), "max(x, 0)", NUMERIC)
_unary("Sigmoid", in_float64(lambda x: 1.0 / (1.0 + np.exp(-x))), "1 / (1 + exp(-x))")
_unary("Tanh", in_float64(np.tanh), "tanh(x)")
_unary("Exp", in_float64(np.exp), "exp(x)")
_unary("Erf", in_float64(_erf64), "the error function")
_unary("Sqrt", in_float64(np.sqrt), "square root")
_unary("Neg", np.negative, "-x", NUMERIC)
_unary("Abs", np.abs, "|x|", NUMERIC)
_unary("HardSwish", lambda x: x * _hard_sigmoid(x, 1 / 6, 0.5), "x * clip(x / 6 + 1/2, 0, 1)")

register(
    OpDef(
        "HardSigmoid",
        (1, 1),
        partial(unary_same, allowed=FLOATS),
        lambda xs, a: [_hard_sigmoid(xs[0], attr_float(a, "alpha"), attr_float(a, "beta"))],
        "clip(alpha * x + beta, 0, 1)",
        {"alpha": AttrSpec("float", 0.2), "beta": AttrSpec("float", 0.5)},
    )
)
register(
    OpDef(
        "LeakyRelu",
        (1, 1),
        partial(unary_same, allowed=FLOATS),
        lambda xs, a: [
            np.where(xs[0] < 0, xs[0] * np.float32(attr_float(a, "alpha")), xs[0]).astype(xs[0].dtype)
        ],
        "x if x >= 0 else alpha * x",
        {"alpha": AttrSpec("float", 0.01)},
    )
)
register(
    OpDef(
        "Gelu",
        (1, 1),
        partial(unary_same, allowed=FLOATS),
        lambda xs, a: [in_float64(partial(_gelu64, approximate=str(a["approximate"])))(xs[0])],
        "x * Phi(x); approximate = none | tanh",
        {"approximate": AttrSpec("str", "none")},
    )
)
register(
    OpDef(
        "Clip",
        (1, 1),
        partial(unary_same, allowed=NUMERIC),
        lambda xs, a: [_clip(xs[0], a)],
        "min(max(x, min), max); bounds are attributes (either ONNX form)",
        {"min": AttrSpec("float", -math.inf), "max": AttrSpec("float", math.inf)},
    )
)


def _any_same(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    return [TensorType(x.shape, x.dtype)]


register(OpDef("Identity", (1, 1), _any_same, lambda xs, a: [xs[0]], "x"))
register(
    OpDef(
        "Dropout", (1, 1), _any_same, lambda xs, a: [xs[0]], "x (inference: no dropout, only the data output)"
    )
)


def _cast_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    to = str(attrs["to"])
    check(to in NUMERIC + ("bool",), f"cannot cast to {to}")
    return [TensorType(x.shape, to)]


register(
    OpDef(
        "Cast",
        (1, 1),
        _cast_rule,
        lambda xs, a: [xs[0].astype(str(a["to"]))],
        "x converted to dtype `to` (a numpy dtype name)",
        {"to": AttrSpec("str")},
    )
)


# -- broadcasting arithmetic ---------------------------------------------------------------------


def _binary_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    dtype = same_dtype(values)
    return [TensorType(broadcast([v.shape for v in values]), dtype)]


def _pow_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, y = values
    check(x.dtype in NUMERIC and y.dtype in NUMERIC, f"Pow of {x.dtype} by {y.dtype}")
    return [TensorType(broadcast([x.shape, y.shape]), x.dtype)]


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":  # ONNX integer division truncates toward zero, numpy floors
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return (q + fix).astype(a.dtype)
    return np.divide(a, b)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return np.power(a, b.astype(a.dtype)).astype(a.dtype)


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], summary: str) -> None:
    register(OpDef(name, (2, 2), _binary_rule, lambda xs, a: [fn(xs[0], xs[1])], summary))


def _variadic(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], summary: str) -> None:
    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return [np.broadcast_to(out, broadcast([x.shape for x in xs])).copy()]

    register(OpDef(name, (1, None), _binary_rule, run, summary))


_binary("Add", np.add, "a + b (broadcasting)")
_binary("Sub", np.subtract, "a - b (broadcasting)")
_binary("Mul", np.multiply, "a * b (broadcasting)")
_binary("Div", _divide, "a / b (broadcasting; integers truncate toward zero)")
register(
    OpDef(
        "Pow",
        (2, 2),
        _pow_rule,
        lambda xs, a: [_power(xs[0], xs[1])],
        "a ** b (broadcasting; the dtype of a)",
    )
)
_variadic("Sum", np.add, "sum of the inputs (broadcasting)")
_variadic("Max", np.maximum, "element-wise maximum of the inputs (broadcasting)")
_variadic("Min", np.minimum, "element-wise minimum of the inputs (broadcasting)")
