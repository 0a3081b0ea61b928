"""Bound inference: the region of a stage that the loops inside its attach point read.

A stage's domain is, per original axis, an affine lower bound over the enclosing loop variables
and a constant extent.  Leaf loops derive from the domain through the stage's split and fuse
relations; a split that does not divide its axis is an error, since every tile must have the
same shape for the accelerator's micro-op kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import ScheduleError
from compiler.schedule.schedule import Stage
from compiler.te import expr as E
from compiler.te.affine import Affine, affine


@dataclass(frozen=True)
class Domain:
    low: Affine
    extent: int

    def union(self, other: Domain, stage: str) -> Domain:
        if dict(self.low.coeffs) != dict(other.low.coeffs):
            raise ScheduleError(
                f"stage {stage} is read at regions that start at {self.low} and {other.low}: "
                "their union is not one tile"
            )
        low = min(self.low.const, other.low.const)
        high = max(self.low.const + self.extent, other.low.const + other.extent)
        return Domain(Affine(self.low.coeffs, low), high - low)


@dataclass(frozen=True)
class LoopAxis:
    name: str
    var: E.Var
    extent: int
    reduce: bool = False
    kind: str = "serial"


def leaf_loops(st: Stage, domain: list[Domain]) -> tuple[list[LoopAxis], dict[E.Var, E.Expr]]:
    """The stage's leaf loops and each original axis as an expression over them."""
    extents = {a.name: d.extent for a, d in zip(st.axes, domain, strict=True)}
    extents.update({a.name: a.extent for a in st.reduce_axes})
    for rel in st.relations:
        if rel.kind == "fuse":
            extents[rel.parent] = extents[rel.outer] * extents[rel.inner]
            continue
        n = extents[rel.parent]
        if rel.kind == "split":
            what = f"split({st.name}, {rel.parent}, factor={rel.factor})"
            inner, outer = rel.factor, n // rel.factor
        else:
            what = f"virtual_thread({st.name}, {rel.parent}, count={rel.factor})"
            outer, inner = rel.factor, n // rel.factor
        if n % rel.factor:
            raise ScheduleError(f"{what}: axis {rel.parent} has extent {n} here, which "
                                f"{rel.factor} does not divide")
        extents[rel.outer], extents[rel.inner] = outer, inner
    var = {name: E.Var(f"{st.name}.{name}") for name in extents}
    value: dict[str, E.Expr] = {name: var[name] for name in st.leaves}
    for rel in reversed(st.relations):
        if rel.kind == "fuse":
            inner_n = extents[rel.inner]
            value[rel.outer] = value[rel.parent] // inner_n
            value[rel.inner] = value[rel.parent] % inner_n
        else:
            value[rel.parent] = value[rel.outer] * extents[rel.inner] + value[rel.inner]
    index: dict[E.Var, E.Expr] = {}
    for a, d in zip(st.axes, domain, strict=True):
        index[a.var] = _simplify(value[a.name] + d.low.to_expr())
    for a in st.reduce_axes:
        index[a.var] = _simplify(value[a.name])
    leaves = [
        LoopAxis(name, var[name], extents[name], name in st.reduce_names,
                 "vthread" if name in st.vthreads else st.loop_kinds.get(name, "serial"))
        for name in st.leaves
    ]
    return leaves, index


def _simplify(e: E.Expr) -> E.Expr:
    form = affine(e)
    return form.to_expr() if form is not None else e


def region_of(stage: str, reader: str, indices: list[E.Expr], symbolic: set[E.Var],
              extents: dict[E.Var, int]) -> list[Domain]:
    """The region `indices` cover when every variable outside `symbolic` ranges fully."""
    out = []
    for dim, e in enumerate(indices):
        form = affine(e)
        if form is None:
            raise ScheduleError(f"stage {stage}: {reader} reads it at index {e} (dimension {dim}), "
                                "which is not affine: its region cannot be bounded")
        low, high = form.const, form.const
        keep = {}
        for v, c in form.coeffs.items():
            if v in symbolic:
                keep[v] = c
                continue
            if v not in extents:
                raise ScheduleError(f"stage {stage}: {reader} reads it with loop {v.name}, which "
                                    "is not inside the attach point")
            span = c * (extents[v] - 1)
            low, high = low + min(0, span), high + max(0, span)
        out.append(Domain(Affine(keep, low), high - low + 1))
    return out
