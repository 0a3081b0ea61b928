"""Expression nodes of the tensor-expression language and of the loop IR.

Nodes are frozen dataclasses: hashable, compared by structure, printable.  Python operators build
arithmetic (`+ - * // % >> <<`); comparisons are functions (`lt`, `ge`, ...) because `==` must stay
structural equality.  Integer dtypes only: the accelerator computes on integers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from compiler.errors import TensorExprError

if TYPE_CHECKING:
    from compiler.te.tensor import IterVar, Tensor

BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "bool": 1}
INDEX = "int32"  # dtype of loop variables and index arithmetic

ExprLike = Union["Expr", int]


def check_dtype(dtype: str) -> str:
    if dtype not in BITS:
        raise TensorExprError(f"unknown dtype {dtype!r}; known: {', '.join(BITS)}")
    return dtype


class Expr:
    """Base of every expression node; subclasses define `dtype`."""

    dtype: str

    def __add__(self, other: ExprLike) -> Expr:
        return binary("+", self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return binary("+", other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return binary("-", self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return binary("-", other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return binary("*", self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return binary("*", other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary("//", self, other)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary("%", self, other)

    def __rshift__(self, other: ExprLike) -> Expr:
        return binary(">>", self, other)

    def __lshift__(self, other: ExprLike) -> Expr:
        return binary("<<", self, other)

    def __neg__(self) -> Expr:
        return binary("-", const(0, self.dtype), self)

    def astype(self, dtype: str) -> Expr:
        return cast(dtype, self)


@dataclass(frozen=True)
class Var(Expr):
    name: str
    dtype: str = INDEX

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const(Expr):
    value: int
    dtype: str = INDEX

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True)
class Cast(Expr):
    value: Expr
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}({self.value})"


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    then: Expr
    other: Expr
    dtype: str

    def __str__(self) -> str:
        return f"select({self.cond}, {self.then}, {self.other})"


@dataclass(frozen=True)
class Load(Expr):
    """tensor[indices]: a read of a tensor (a DRAM tensor or, after lowering, a buffer)."""

    tensor: Tensor
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype

    def __str__(self) -> str:
        return f"{self.tensor.name}[{', '.join(str(i) for i in self.indices)}]"


@dataclass(frozen=True)
class Reduce(Expr):
    """sum(source) over the reduce axes `axes`."""

    source: Expr
    axes: tuple[IterVar, ...]
    dtype: str

    def __str__(self) -> str:
        names = ", ".join(a.var.name for a in self.axes)
        return f"sum({self.source}, axis=[{names}])"


ARITH = ("+", "-", "*", "//", "%", ">>", "<<", "min", "max")
COMPARE = ("<", "<=", ">", ">=", "==", "!=")
LOGIC = ("and", "or")


def const(value: int, dtype: str = INDEX) -> Const:
    return Const(int(value), check_dtype(dtype))


def as_expr(value: ExprLike, like: str = INDEX) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(getattr(value, "var", None), Var):  # an IterVar stands for its variable
        return value.var  # type: ignore[attr-defined, no-any-return]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an expression or an int, not {type(value).__name__} {value!r}")
    return Const(value, like)


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """`a op b`; an int operand takes the other's dtype, two expressions must agree."""
    if isinstance(a, Expr):
        lhs, rhs = a, as_expr(b, a.dtype)
    else:
        rhs = as_expr(b)
        lhs = as_expr(a, rhs.dtype)
    if op in LOGIC:
        if lhs.dtype != "bool" or rhs.dtype != "bool":
            raise TensorExprError(f"'{op}' needs two conditions, not {lhs.dtype} and {rhs.dtype}")
        return Bin(op, lhs, rhs, "bool")
    if lhs.dtype != rhs.dtype:
        raise TensorExprError(
            f"operands of '{op}' have different dtypes {lhs.dtype} and {rhs.dtype} in "
            f"{lhs} {op} {rhs}; cast one of them"
        )
    if lhs.dtype == "bool":
        raise TensorExprError(f"'{op}' needs integer operands, not conditions")
    return Bin(op, lhs, rhs, "bool" if op in COMPARE else lhs.dtype)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    return binary("min", a, b)


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    return binary("max", a, b)


def lt(a: ExprLike, b: ExprLike) -> Expr:
    return binary("<", a, b)


def le(a: ExprLike, b: ExprLike) -> Expr:
    return binary("<=", a, b)


def gt(a: ExprLike, b: ExprLike) -> Expr:
    return binary(">", a, b)


def ge(a: ExprLike, b: ExprLike) -> Expr:
    return binary(">=", a, b)


def all_of(*conds: Expr) -> Expr:
    if not conds:
        raise TensorExprError("all_of needs at least one condition")
    out = conds[0]
    for c in conds[1:]:
        out = binary("and", out, c)
    return out


def cast(dtype: str, value: ExprLike) -> Expr:
    value = as_expr(value)
    check_dtype(dtype)
    return value if value.dtype == dtype else Cast(value, dtype)


def if_then_else(cond: Expr, then: ExprLike, other: ExprLike) -> Expr:
    """`then` where `cond` holds, else `other` (used for zero padding)."""
    if not isinstance(cond, Expr) or cond.dtype != "bool":
        raise TensorExprError(f"if_then_else needs a condition (a comparison), not {cond}")
    t = as_expr(then) if isinstance(then, Expr) else None
    o = as_expr(other) if isinstance(other, Expr) else None
    dtype = (t or o).dtype if (t or o) is not None else INDEX  # type: ignore[union-attr]
    t, o = as_expr(then, dtype), as_expr(other, dtype)
    if t.dtype != o.dtype:
        raise TensorExprError(f"if_then_else branches have dtypes {t.dtype} and {o.dtype}")
    return Select(cond, t, o, t.dtype)


# -- traversal ------------------------------------------------------------------------------------


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.cond, e.then, e.other)
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return (e.source,)
    return ()


def rebuild(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """`e` with `fn` applied to each direct child."""
    if isinstance(e, Bin):
        return Bin(e.op, fn(e.a), fn(e.b), e.dtype)
    if isinstance(e, Cast):
        return Cast(fn(e.value), e.dtype)
    if isinstance(e, Select):
        return Select(fn(e.cond), fn(e.then), fn(e.other), e.dtype)
    if isinstance(e, Load):
        return Load(e.tensor, tuple(fn(i) for i in e.indices))
    if isinstance(e, Reduce):
        return Reduce(fn(e.source), e.axes, e.dtype)
    return e


def substitute(e: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """`e` with every Var in `mapping` replaced."""
    if not mapping:
        return e
    if isinstance(e, Var):
        return mapping.get(e, e)
    return rebuild(e, lambda c: substitute(c, mapping))


def walk(e: Expr) -> list[Expr]:
    """Every node of `e`, parents before children."""
    out = [e]
    for c in children(e):
        out.extend(walk(c))
    return out


def loads(e: Expr) -> list[Load]:
    return [n for n in walk(e) if isinstance(n, Load)]


def free_vars(e: Expr) -> set[Var]:
    return {n for n in walk(e) if isinstance(n, Var)}


# -- concrete evaluation --------------------------------------------------------------------------


def wrap(value: int, dtype: str) -> int:
    """`value` wrapped to the two's-complement range of `dtype`."""
    bits = BITS[dtype]
    if dtype == "bool":
        return int(bool(value))
    if dtype.startswith("uint"):
        return value & ((1 << bits) - 1)
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    ">>": lambda a, b: a >> b if b >= 0 else a << -b, "<<": lambda a, b: a << b,
    "min": min, "max": max,
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "and": lambda a, b: int(bool(a) and bool(b)), "or": lambda a, b: int(bool(a) or bool(b)),
}  # fmt: skip


def evaluate(e: Expr, env: Mapping[Var, int]) -> int:
    """The integer value of an index expression (no loads) under `env`."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        try:
            return env[e]
        except KeyError:
            raise TensorExprError(f"variable {e.name} has no value") from None
    if isinstance(e, Bin):
        return wrap(_INT_OPS[e.op](evaluate(e.a, env), evaluate(e.b, env)), e.dtype)
    if isinstance(e, Cast):
        return wrap(evaluate(e.value, env), e.dtype)
    if isinstance(e, Select):
        return evaluate(e.then if evaluate(e.cond, env) else e.other, env)
    raise TensorExprError(f"cannot evaluate {e} to a constant")
