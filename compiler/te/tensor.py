"""Tensors: placeholders (inputs) and computes (a shape, axes and a body expression).

`compute(shape, fn)` calls `fn` with one index variable per dimension and checks the body it
returns: every load has as many indices as its tensor has dimensions, dtypes agree, reductions
sit only at the top of a body.  A compute has no tiling: that is the schedule's business.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from compiler.errors import TensorExprError
from compiler.te.expr import (
    INDEX,
    REDUCERS,
    Expr,
    ExprLike,
    Load,
    Reduce,
    Var,
    as_expr,
    check_dtype,
    loads,
    walk,
)


@dataclass(frozen=True)
class IterVar:
    """A loop axis: a variable with the range [0, extent); `reduce` for reduction axes."""

    var: Var
    extent: int
    reduce: bool = False

    @property
    def name(self) -> str:
        return self.var.name


@dataclass(frozen=True)
class ComputeOp:
    axes: tuple[IterVar, ...]
    body: Expr

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()


@dataclass(frozen=True, eq=False)
class Tensor:
    """A named n-d array; `op` is None for a placeholder (data that comes from DRAM)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    op: ComputeOp | None = field(default=None, repr=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return self.op is None

    def __getitem__(self, index: ExprLike | IterVar | tuple[ExprLike | IterVar, ...]) -> Load:
        items = index if isinstance(index, tuple) else (index,)
        if len(items) != self.ndim:
            raise TensorExprError(
                f"{self.name} has {self.ndim} dimensions {self.shape}, indexed with {len(items)}"
            )
        exprs = tuple(as_expr(i.var if isinstance(i, IterVar) else i) for i in items)
        for i in exprs:
            if i.dtype != INDEX:
                raise TensorExprError(f"index {i} of {self.name} must be {INDEX}, not {i.dtype}")
        return Load(self, exprs)

    def inputs(self) -> list[Tensor]:
        """The tensors this one reads, in order of first use."""
        if self.op is None:
            return []
        seen: dict[int, Tensor] = {}
        for load in loads(self.op.body):
            seen.setdefault(id(load.tensor), load.tensor)
        return list(seen.values())

    def __repr__(self) -> str:
        kind = "placeholder" if self.op is None else "compute"
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype}, {kind})"


def _shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    out = tuple(shape)
    for s in out:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise TensorExprError(f"{what}: every dimension must be a positive int, not {shape}")
    return out


def placeholder(shape: Sequence[int], dtype: str = "int8", name: str = "data") -> Tensor:
    return Tensor(name, _shape(shape, f"placeholder {name}"), check_dtype(dtype))


def reduce_axis(extent: int, name: str) -> IterVar:
    if isinstance(extent, bool) or not isinstance(extent, int) or extent < 1:
        raise TensorExprError(f"reduce axis {name}: extent must be a positive int, not {extent}")
    return IterVar(Var(name), extent, reduce=True)


def reduce(op: str, expr: ExprLike, axis: IterVar | Sequence[IterVar]) -> Reduce:
    """`op` (sum, max or min) of `expr` over the reduce axes `axis`."""
    if op not in REDUCERS:
        raise TensorExprError(f"unknown reduction {op!r}; known: {', '.join(REDUCERS)}")
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes or not all(isinstance(a, IterVar) and a.reduce for a in axes):
        raise TensorExprError(f"{op} needs one or more axes made by reduce_axis")
    source = as_expr(expr)
    if source.dtype == "bool":
        raise TensorExprError(f"{op} of a condition; cast it to an integer first")
    return Reduce(source, axes, source.dtype, op)


def sum(expr: ExprLike, axis: IterVar | Sequence[IterVar]) -> Reduce:
    return reduce("sum", expr, axis)


def max_reduce(expr: ExprLike, axis: IterVar | Sequence[IterVar]) -> Reduce:
    """The largest value of `expr` over `axis` (NaN-propagating for floats, like numpy.max)."""
    return reduce("max", expr, axis)


def min_reduce(expr: ExprLike, axis: IterVar | Sequence[IterVar]) -> Reduce:
    return reduce("min", expr, axis)


def compute(shape: Sequence[int], fn: Callable[..., ExprLike], name: str,
            dtype: str | None = None) -> Tensor:
    """A tensor whose element at index (i0, i1, ...) is `fn(i0, i1, ...)`.  The axes take the
    names of `fn`'s parameters; `fn` may also take `*i` (any rank), naming them i0, i1, ..."""
    dims = _shape(shape, f"compute {name}")
    params = _axis_names(fn, len(dims))
    if len(params) != len(dims):
        raise TensorExprError(
            f"compute {name}: the index function takes {len(params)} arguments for a "
            f"{len(dims)}-d shape {dims}"
        )
    axes = tuple(IterVar(Var(p), n) for p, n in zip(params, dims, strict=True))
    body = as_expr(fn(*(a.var for a in axes)))
    if dtype is not None and check_dtype(dtype) != body.dtype:
        raise TensorExprError(f"compute {name}: body has dtype {body.dtype}, declared {dtype}")
    _check_body(name, body, axes)
    return Tensor(name, dims, body.dtype, ComputeOp(axes, body))


def _axis_names(fn: Callable[..., ExprLike], ndim: int) -> list[str]:
    params = list(inspect.signature(fn).parameters.values())
    if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return [f"{params[0].name}{k}" for k in range(ndim)]
    return [p.name for p in params]


def _check_body(name: str, body: Expr, axes: tuple[IterVar, ...]) -> None:
    nodes = walk(body)
    nested = [n for n in nodes[1:] if isinstance(n, Reduce)]
    if nested:
        raise TensorExprError(f"compute {name}: a reduction must be the whole body, not nested")
    if body.dtype == "bool":
        raise TensorExprError(f"compute {name}: the body is a condition, not a value")
    allowed = {a.var for a in axes}
    if isinstance(body, Reduce):
        allowed |= {a.var for a in body.axes}
        clash = {a.var for a in body.axes} & {a.var for a in axes}
        if clash:
            raise TensorExprError(f"compute {name}: reduce axis {sorted(v.name for v in clash)} "
                                  "has the name of a spatial axis")
    stray = {n for n in nodes if isinstance(n, Var)} - allowed
    if stray:
        names = ", ".join(sorted(v.name for v in stray))
        raise TensorExprError(f"compute {name}: body uses variables {names} that are not its axes")
