"""The tensor-expression language: what an operator computes, with no tiling."""

from compiler.te.affine import Affine, affine, linear_coeffs
from compiler.te.expr import (
    Bin,
    Cast,
    Const,
    Expr,
    Load,
    Reduce,
    Select,
    Var,
    all_of,
    cast,
    const,
    evaluate,
    ge,
    gt,
    if_then_else,
    le,
    lt,
    maximum,
    minimum,
    substitute,
)
from compiler.te.tensor import ComputeOp, IterVar, Tensor, compute, placeholder, reduce_axis, sum

__all__ = [
    "Affine", "Bin", "Cast", "ComputeOp", "Const", "Expr", "IterVar", "Load", "Reduce", "Select",
    "Tensor", "Var", "affine", "all_of", "cast", "compute", "const", "evaluate", "ge", "gt",
    "if_then_else", "le", "linear_coeffs", "lt", "maximum", "minimum", "placeholder", "reduce_axis",
    "substitute", "sum",
]  # fmt: skip
