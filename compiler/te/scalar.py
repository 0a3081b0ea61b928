"""Scalar semantics of the dtypes, one place for `evaluate` and for code generators to agree on.

Integers wrap to their two's-complement (or unsigned) range.  float32 values are held in Python
floats but every operation is done in numpy float32, so it rounds as IEEE single precision does.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "bool": 1, "float32": 32}
FLOATS = frozenset({"float32"})


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def int_range(dtype: str) -> tuple[int, int]:
    """The lowest and highest value of an integer dtype."""
    bits = BITS[dtype]
    if dtype == "bool":
        return 0, 1
    if dtype.startswith("uint"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def wrap(value: int, dtype: str) -> int:
    """`value` wrapped to the two's-complement range of `dtype`."""
    bits = BITS[dtype]
    if dtype == "bool":
        return int(bool(value))
    if dtype.startswith("uint"):
        return value & ((1 << bits) - 1)
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


INT_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    ">>": lambda a, b: a >> b if b >= 0 else a << -b, "<<": lambda a, b: a << b,
    "min": min, "max": max,
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "and": lambda a, b: int(bool(a) and bool(b)), "or": lambda a, b: int(bool(a) or bool(b)),
}

_FLOAT_OPS: dict[str, Callable[[np.float32, np.float32], object]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "min": np.minimum, "max": np.maximum,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")


def float_op(op: str, a: int | float, b: int | float) -> int | float:
    """One float32 operation, rounded to float32 (numpy float32 scalars); a comparison gives 0
    or 1 (false for NaN except `!=`); min and max propagate NaN like numpy's minimum/maximum."""
    with np.errstate(all="ignore"):
        out = _FLOAT_OPS[op](np.float32(a), np.float32(b))
    return int(bool(out)) if op in _COMPARE else float(out)  # type: ignore[arg-type]


def cast_value(value: int | float, src: str, dst: str) -> int | float:
    """`value` of dtype `src` converted to `dst` as a cast does: integers wrap, float -> integer
    truncates toward zero and saturates (NaN -> 0), integer -> float rounds to nearest even."""
    if is_float(dst):
        return float(np.float32(value))
    if not is_float(src):
        return wrap(int(value), dst)
    low, high = int_range(dst)
    if math.isnan(value):
        return 0
    if math.isinf(value):
        return high if value > 0 else low
    return min(max(math.trunc(value), low), high)


_MATH_F64: dict[str, Callable[[float], float]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "erf": math.erf, "tanh": math.tanh, "fabs": abs, "floor": np.floor, "rint": np.rint,
}


def math_value(name: str, value: int | float) -> float:
    """A math call computed in float64 and rounded once to float32: the reference semantics (a
    compiled kernel may differ by an ulp or two, see compiler.codegen.llvm_math)."""
    with np.errstate(all="ignore"):
        return float(np.float32(_MATH_F64[name](float(value))))
