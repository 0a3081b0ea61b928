"""Tree rewriting helpers for the loop IR."""

from __future__ import annotations

from collections.abc import Callable

from compiler.errors import ScheduleError
from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S


def post_order(node: S.Stmt, fn: Callable[[S.Stmt], S.Stmt]) -> S.Stmt:
    """Rebuild `node` bottom-up, applying `fn` to every statement after its children."""
    if isinstance(node, S.Seq):
        node = S.seq(*(post_order(s, fn) for s in node.stmts))
    elif isinstance(node, S.For):
        node = S.For(node.var, node.extent, post_order(node.body, fn), node.kind)
    elif isinstance(node, S.Attr):
        node = S.Attr(node.key, node.value, node.stage, post_order(node.body, fn))
    return fn(node)


def leaves(node: S.Stmt) -> list[S.Stmt]:
    if isinstance(node, S.Seq):
        return [x for s in node.stmts for x in leaves(s)]
    if isinstance(node, S.For | S.Attr):
        return leaves(node.body)
    return [node]


def perfect_nest(node: S.Stmt) -> tuple[list[tuple[E.Var, int]], S.Stmt]:
    """The loops of a perfect nest (outermost first) and the statement inside them."""
    loops = []
    while isinstance(node, S.For | S.Attr):
        if isinstance(node, S.For):
            loops.append((node.var, node.extent))
        node = node.body
    return loops, node


def flat_index(t: Tensor, indices: tuple[E.Expr, ...], where: str) -> Affine:
    """Element index of `t[indices]`, lanes dropped: row-major over the outer dimensions, plus
    the buffer's base for a scratchpad buffer."""
    out, stride = Affine(), 1
    for size, e in zip(reversed(t.shape[:-2]), reversed(indices[:-2]), strict=True):
        form = affine(e)
        if form is None:
            raise ScheduleError(f"{where}: index {e} of {t.name} is not affine")
        out = out + form.scale(stride)
        stride *= size
    return out + t.base if isinstance(t, S.Buffer) else out


def bind_affine(form: Affine, var: E.Var, value: int) -> Affine:
    c = form.coeff(var)
    if not c:
        return form
    return Affine({v: k for v, k in form.coeffs.items() if v != var}, form.const + c * value)
