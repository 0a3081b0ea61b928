"""The one affine analysis of index expressions, shared by every pass that needs it.

`affine(e)` writes an index expression as `const + sum(coeff * var)` or returns None when it is
not affine (a product of two variables, a division, a select).  Bound inference, DMA pattern
extraction, micro-op loop folding and ALU lowering all use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from compiler.te.expr import INDEX, Bin, Cast, Const, Expr, Var, const


@dataclass(frozen=True)
class Affine:
    coeffs: Mapping[Var, int] = field(default_factory=dict)
    const: int = 0

    def coeff(self, var: Var) -> int:
        return self.coeffs.get(var, 0)

    def evaluate(self, env: Mapping[Var, int]) -> int:
        return self.const + sum(c * env[v] for v, c in self.coeffs.items())

    def without(self, variables: set[Var] | frozenset[Var]) -> Affine:
        return Affine({v: c for v, c in self.coeffs.items() if v not in variables}, self.const)

    def __add__(self, other: Affine) -> Affine:
        coeffs = dict(self.coeffs)
        for v, c in other.coeffs.items():
            coeffs[v] = coeffs.get(v, 0) + c
        return Affine({v: c for v, c in coeffs.items() if c}, self.const + other.const)

    def scale(self, k: int) -> Affine:
        return Affine({v: c * k for v, c in self.coeffs.items() if c * k}, self.const * k)

    def to_expr(self) -> Expr:
        out: Expr | None = None
        for v, c in sorted(self.coeffs.items(), key=lambda item: item[0].name):
            term: Expr = v if c == 1 else v * c
            out = term if out is None else out + term
        if out is None:
            return const(self.const)
        return out + self.const if self.const else out

    def __str__(self) -> str:
        return str(self.to_expr())


def affine(e: Expr) -> Affine | None:
    """`e` as an Affine over its variables, or None when it is not affine."""
    if isinstance(e, Const):
        return Affine({}, e.value)
    if isinstance(e, Var):
        return Affine({e: 1}, 0)
    if isinstance(e, Cast) and e.dtype == INDEX:
        return affine(e.value)
    if not isinstance(e, Bin):
        return None
    a, b = affine(e.a), affine(e.b)
    if a is None or b is None:
        return None
    if e.op == "+":
        return a + b
    if e.op == "-":
        return a + b.scale(-1)
    if e.op == "*":
        if not a.coeffs:
            return b.scale(a.const)
        if not b.coeffs:
            return a.scale(b.const)
    return None


def linear_coeffs(e: Expr, variables: list[Var]) -> tuple[list[int], Affine] | None:
    """Coefficients of `variables` in `e` and the rest of it, or None when `e` is not affine."""
    form = affine(e)
    if form is None:
        return None
    return [form.coeff(v) for v in variables], form.without(set(variables))
