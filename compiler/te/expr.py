"""Expression nodes of the tensor-expression language and of the loop IR.

Nodes are frozen dataclasses: hashable, compared by structure, printable.  Python operators build
arithmetic (`+ - * / // % >> <<`); comparisons are functions (`lt`, `ge`, ...) because `==` must
stay structural equality.

Integer dtypes wrap (two's complement) and are what the accelerator computes on.  `float32` is for
host kernels: IEEE single precision, every operation rounded to float32, `/` only on floats and
`// % >> <<` only on integers.  A float -> integer cast truncates toward zero and saturates to the
integer's range (NaN -> 0), so every cast has a defined value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from compiler.errors import TensorExprError
from compiler.te.scalar import (
    BITS,
    INT_OPS,
    cast_value,
    float_op,
    int_range,
    is_float,
    math_value,
    wrap,
)

if TYPE_CHECKING:
    from compiler.te.tensor import IterVar, Tensor

INDEX = "int32"  # dtype of loop variables and index arithmetic

ExprLike = Union["Expr", int, float]


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

    def __truediv__(self, other: ExprLike) -> Expr:
        return binary("/", self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return binary("/", other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary("//", self, other)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary("%", self, other)

    def __rshift__(self, other: ExprLike) -> Expr:
        return binary(">>", self, other)

    def __lshift__(self, other: ExprLike) -> Expr:
        return binary("<<", self, other)

    def __neg__(self) -> Expr:
        if is_float(self.dtype):  # -0.0 - x is -x for every x, zeros and NaN included
            return binary("-", FloatConst(-0.0, self.dtype), self)
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
class FloatConst(Expr):
    """A floating-point constant (Const holds integers only)."""

    value: float
    dtype: str = "float32"

    def __str__(self) -> str:
        return repr(self.value)


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
class Call(Expr):
    """A pure math function of float operands, one of MATH (`exp(x)`)."""

    name: str
    args: tuple[Expr, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


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
    """`op`(source) over the reduce axes `axes`: op is one of REDUCERS (sum, max, min)."""

    source: Expr
    axes: tuple[IterVar, ...]
    dtype: str
    op: str = "sum"

    def __str__(self) -> str:
        names = ", ".join(a.var.name for a in self.axes)
        return f"{self.op}({self.source}, axis=[{names}])"

    @property
    def identity(self) -> Expr:
        """The value a reduction starts from: 0 for sum, the lowest value for max."""
        return reduce_identity(self.op, self.dtype)


ARITH = ("+", "-", "*", "/", "//", "%", ">>", "<<", "min", "max")
INT_ONLY = ("//", "%", ">>", "<<")
REDUCERS = ("sum", "max", "min")
# Float math calls (numpy's names): `rint` rounds half to even, `rsqrt` is 1 / sqrt.
MATH = ("exp", "log", "sqrt", "rsqrt", "erf", "tanh", "fabs", "floor", "rint")
COMPARE = ("<", "<=", ">", ">=", "==", "!=")
LOGIC = ("and", "or")


def const(value: int | float, dtype: str = INDEX) -> Const | FloatConst:
    """A constant of `dtype`: a FloatConst for float dtypes, else an (integer) Const."""
    if is_float(check_dtype(dtype)):
        return FloatConst(float(value), dtype)
    return Const(int(value), dtype)


def as_expr(value: ExprLike, like: str = INDEX) -> Expr:
    """`value` as an expression; a Python number takes the dtype `like` (a float literal beside
    an integer operand becomes float32, so that the dtype check names the mismatch)."""
    if isinstance(value, Expr):
        return value
    if isinstance(getattr(value, "var", None), Var):  # an IterVar stands for its variable
        return value.var  # type: ignore[union-attr, no-any-return]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected an expression or a number, not {type(value).__name__} {value!r}")
    if isinstance(value, float):
        return FloatConst(value, like if is_float(like) else "float32")
    return FloatConst(float(value), like) if is_float(like) else Const(value, like)


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
    if op == "/" and not is_float(lhs.dtype):
        raise TensorExprError(f"'/' divides floats, not {lhs.dtype}; use // for integers")
    if op in INT_ONLY and is_float(lhs.dtype):
        raise TensorExprError(f"'{op}' needs integer operands, not {lhs.dtype}")
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
    if dtype == "bool" and is_float(value.dtype):
        raise TensorExprError(f"cannot cast {value.dtype} to bool; compare it instead")
    return value if value.dtype == dtype else Cast(value, dtype)


def call(name: str, *args: ExprLike) -> Expr:
    """The math function `name` (one of MATH) of float operands."""
    if name not in MATH:
        raise TensorExprError(f"unknown math function {name!r}; known: {', '.join(MATH)}")
    exprs = tuple(as_expr(a, "float32") for a in args)
    if len(exprs) != 1:
        raise TensorExprError(f"{name} takes 1 operand, not {len(exprs)}")
    for a in exprs:
        if not is_float(a.dtype):
            raise TensorExprError(f"{name} needs a float operand, not {a.dtype} {a}; cast it")
    return Call(name, exprs, exprs[0].dtype)


def exp(x: ExprLike) -> Expr:
    return call("exp", x)


def log(x: ExprLike) -> Expr:
    return call("log", x)


def sqrt(x: ExprLike) -> Expr:
    return call("sqrt", x)


def rsqrt(x: ExprLike) -> Expr:
    return call("rsqrt", x)


def erf(x: ExprLike) -> Expr:
    return call("erf", x)


def tanh(x: ExprLike) -> Expr:
    return call("tanh", x)


def fabs(x: ExprLike) -> Expr:
    return call("fabs", x)


def floor(x: ExprLike) -> Expr:
    return call("floor", x)


def rint(x: ExprLike) -> Expr:
    """Round half to even (ONNX QuantizeLinear's rounding, numpy's rint)."""
    return call("rint", x)


def reduce_identity(op: str, dtype: str) -> Expr:
    """The identity of reducer `op` on `dtype` (the lowest value for max, the highest for min)."""
    if op == "sum":
        return const(0, dtype)
    if is_float(dtype):
        return FloatConst(float("-inf") if op == "max" else float("inf"), dtype)
    low, high = int_range(dtype)
    return Const(low if op == "max" else high, dtype)


def combine(op: str, acc: Expr, value: Expr) -> Expr:
    """One step of reducer `op`: the new accumulator from the old one and a value."""
    return binary({"sum": "+", "max": "max", "min": "min"}[op], acc, value)


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
    if isinstance(e, Call):
        return e.args
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
        return Reduce(fn(e.source), e.axes, e.dtype, e.op)
    if isinstance(e, Call):
        return Call(e.name, tuple(fn(a) for a in e.args), e.dtype)
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


def evaluate(e: Expr, env: Mapping[Var, int]) -> int | float:
    """The value of an expression without loads under `env`: an int (wrapped to its dtype) for
    integer dtypes, a float holding a float32 value for float dtypes."""
    if isinstance(e, Const | FloatConst):
        return e.value
    if isinstance(e, Var):
        try:
            return env[e]
        except KeyError:
            raise TensorExprError(f"variable {e.name} has no value") from None
    if isinstance(e, Bin):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if is_float(e.a.dtype):
            return float_op(e.op, a, b)
        return wrap(INT_OPS[e.op](int(a), int(b)), e.dtype)
    if isinstance(e, Cast):
        return cast_value(evaluate(e.value, env), e.value.dtype, e.dtype)
    if isinstance(e, Select):
        return evaluate(e.then if evaluate(e.cond, env) else e.other, env)
    if isinstance(e, Call):
        return math_value(e.name, evaluate(e.args[0], env))
    raise TensorExprError(f"cannot evaluate {e} to a constant")
