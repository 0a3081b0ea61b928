"""The op table's record type and helpers shared by the rule modules.

An `OpDef` is the single place that defines an op of the graph IR: how many inputs it takes,
its typed attributes with their defaults, the shape/dtype rule the verifier checks and the
numpy evaluator the reference interpreter and constant folding run. Shape rules and evaluators
see canonical nodes only (attributes complete, axes non-negative, parameters resolved); the
frontend does the normalising.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from compiler.errors import GraphError
from compiler.graph.ir import AttrValue, Node, Shape, Value

Attrs = Mapping[str, AttrValue]


class TensorType(NamedTuple):
    shape: Shape
    dtype: str


InferFn = Callable[[Sequence[Value], Attrs], list[TensorType]]
EvalFn = Callable[[Sequence[np.ndarray], Attrs], list[np.ndarray]]

KINDS = {"int": int, "float": float, "str": str, "ints": tuple, "floats": tuple}
REQUIRED = object()  # marks an attribute without a default


@dataclass(frozen=True)
class AttrSpec:
    kind: str  # one of KINDS
    default: object = REQUIRED


@dataclass(frozen=True)
class OpDef:
    """One op: input arity (max None = variadic), attribute specs, shape rule, evaluator.

    `foldable` is False for ops constant folding must keep even on constant inputs (the
    quantize/dequantize pairs that carry a QDQ model's scales). `shape_only` ops read only their
    input's shape, so they fold even when the input is not constant.
    """

    name: str
    arity: tuple[int, int | None]
    infer: InferFn
    evaluate: EvalFn
    summary: str
    attrs: Mapping[str, AttrSpec] = field(default_factory=dict)
    foldable: bool = True
    shape_only: bool = False


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name} registered twice")
    OPS[op.name] = op
    return op


def check(cond: bool, message: str) -> None:
    """Raise GraphError(message) unless `cond`; shape rules state their conditions with it."""
    if not cond:
        raise GraphError(message)


def make_attrs(op: str, given: Mapping[str, object]) -> dict[str, AttrValue]:
    """`given` completed with `op`'s defaults and coerced to each attribute's kind (an int
    written for a float attribute becomes a float, so equal graphs print equally); unknown or
    missing required names raise GraphError."""
    spec = OPS[op].attrs
    unknown = sorted(set(given) - set(spec))
    check(not unknown, f"{op} has no attribute {', '.join(unknown)}")
    out: dict[str, AttrValue] = {}
    for name, s in spec.items():
        check(name in given or s.default is not REQUIRED, f"{op} needs attribute {name}")
        out[name] = _coerce(s.kind, given.get(name, s.default))
    return out


def _coerce(kind: str, value: Any) -> AttrValue:
    """`value` as `kind`; a value of the wrong kind raises (ValueError/TypeError)."""
    if kind == "float":
        return float(value)
    if kind == "int":
        return int(value)
    if kind == "ints":
        return tuple(int(v) for v in value)
    if kind == "floats":
        return tuple(float(v) for v in value)
    return str(value)


def make_node(
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    attrs: Mapping[str, object] | None = None,
    name: str = "",
) -> Node:
    """A canonical node: attributes completed and coerced by the op table."""
    return Node(op, tuple(inputs), tuple(outputs), make_attrs(op, attrs or {}), name)


# -- small helpers for rules and evaluators ------------------------------------------------------

FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
NUMERIC = FLOATS + INTS


def same_dtype(values: Sequence[Value], allowed: Sequence[str] = NUMERIC) -> str:
    """The common dtype of `values`, which must be one of `allowed`."""
    dtypes = sorted({v.dtype for v in values})
    check(len(dtypes) == 1, f"inputs have different dtypes {', '.join(dtypes)}")
    check(dtypes[0] in allowed, f"dtype {dtypes[0]} is not supported (expected {'/'.join(allowed)})")
    return dtypes[0]


def broadcast(shapes: Sequence[Shape]) -> Shape:
    """Numpy (multidirectional) broadcasting of `shapes`."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise GraphError(f"shapes {', '.join(map(str, shapes))} do not broadcast") from None


def axis_in(axis: int, rank: int, what: str = "axis") -> None:
    check(0 <= axis < rank, f"{what} {axis} is out of range for rank {rank}")


def in_float64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """Evaluate a transcendental function in float64 and round back once, so the reference is
    more accurate than the float32 code it is compared with."""

    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            return fn(x.astype(np.float64)).astype(x.dtype)

    return run


def unary_same(values: Sequence[Value], attrs: Attrs, allowed: Sequence[str] = NUMERIC) -> list[TensorType]:
    (x,) = values
    check(x.dtype in allowed, f"dtype {x.dtype} is not supported (expected {'/'.join(allowed)})")
    return [TensorType(x.shape, x.dtype)]
