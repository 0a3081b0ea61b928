"""Element-wise binary operators with numpy broadcasting: add, sub, mul and div (float32, or
integers that wrap like numpy's; integer div truncates toward zero, as ONNX Div)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import NUMERIC, HostOp, check_dtype, check_shape
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder


def broadcast_shape(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast of two shapes, or ValueError naming both."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError(f"{op}: shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _index(shape: tuple[int, ...], out_index: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
    """The element of a broadcast operand read at `out_index` (size-1 dimensions read 0)."""
    lead = len(out_index) - len(shape)
    return tuple(E.const(0) if n == 1 else i for n, i in zip(shape, out_index[lead:], strict=True))


@dataclass(frozen=True)
class _Binary(HostOp):
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    dtype: str = "float32"
    symbol: ClassVar[str] = "+"

    def __post_init__(self) -> None:
        object.__setattr__(self, "a_shape", check_shape(self.op, self.a_shape))
        object.__setattr__(self, "b_shape", check_shape(self.op, self.b_shape))
        check_dtype(self.op, "operand", self.dtype, NUMERIC)
        broadcast_shape(self.op, self.a_shape, self.b_shape)

    def tensors(self) -> dict[str, Tensor]:
        a = placeholder(self.a_shape, self.dtype, "a")
        b = placeholder(self.b_shape, self.dtype, "b")
        shape = broadcast_shape(self.op, self.a_shape, self.b_shape)
        out = compute(shape, lambda *i: E.binary(self.symbol, a[_index(self.a_shape, i)],
                                                 b[_index(self.b_shape, i)]), "out")
        return {"a": a, "b": b, "out": out}

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[override]
        fn = np.add if self.symbol == "+" else np.multiply
        return fn(a, b).astype(self.dtype)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Add(_Binary):
    op: ClassVar[str] = "add"
    symbol: ClassVar[str] = "+"


@dataclass(frozen=True)
class Mul(_Binary):
    op: ClassVar[str] = "mul"
    symbol: ClassVar[str] = "*"


@dataclass(frozen=True)
class Sub(_Binary):
    op: ClassVar[str] = "sub"
    symbol: ClassVar[str] = "-"

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return np.subtract(a, b).astype(self.dtype)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Div(_Binary):
    """a / b: IEEE division for float32; for integers the quotient truncated toward zero (ONNX
    Div), MIN / -1 wrapping to MIN and a division by zero giving 0, as numpy's does."""

    op: ClassVar[str] = "div"
    symbol: ClassVar[str] = "/"

    def tensors(self) -> dict[str, Tensor]:
        if self.dtype == "float32":
            return super().tensors()
        a = placeholder(self.a_shape, self.dtype, "a")
        b = placeholder(self.b_shape, self.dtype, "b")

        def quotient(*i: E.Expr) -> E.Expr:
            x, y = a[_index(self.a_shape, i)], b[_index(self.b_shape, i)]
            zero, one = E.const(0, self.dtype), E.const(1, self.dtype)
            # TE's // floors: one up when the remainder is non-zero and the signs differ
            negative = E.all_of(E.lt(x, zero), E.gt(y, zero))
            differ = E.binary("or", negative, E.all_of(E.gt(x, zero), E.lt(y, zero)))
            inexact = E.binary("!=", x % y, zero)
            q = x // y + E.if_then_else(E.all_of(inexact, differ), one, zero)
            # x // 0 is x in TE: times 0 (a select of constants, not a branch around loads)
            return q * E.if_then_else(E.binary("==", y, zero), zero, one)

        shape = broadcast_shape(self.op, self.a_shape, self.b_shape)
        return {"a": a, "b": b, "out": compute(shape, quotient, "out")}

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[override]
        if self.dtype == "float32":
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.divide(a, b).astype(np.float32)  # type: ignore[no-any-return]
        # exact in Python integers, then wrapped to the dtype (MIN / -1 = -MIN wraps to MIN)
        x, y = np.broadcast_arrays(a.astype(object), b.astype(object))
        q = np.frompyfunc(_truncated_quotient, 2, 1)(x, y)
        info = np.iinfo(np.dtype(self.dtype))
        span = int(info.max) - int(info.min) + 1
        return ((q - int(info.min)) % span + int(info.min)).astype(self.dtype)  # type: ignore[no-any-return]


def _truncated_quotient(x: int, y: int) -> int:
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q
