"""Tree walking and rewriting for the loop IR, shared by lowering, the passes and the verifier.

The containers are `Seq` (its statements), `For` and `Attr` (their body); every other statement
is a leaf.  `children` and `map_children` are the only code that knows this; the walkers and
rewriters below are built on them:

- `walk` / `walk_loops` iterate (pre-order, in program order), the latter with the `For` loops
  around each statement;
- `post_order` rebuilds bottom-up (a rewrite sees its children already rewritten);
- `pre_order` rebuilds top-down (a rewrite that replaces a statement stops the descent there);
- `with_body` and `wrap_loops` build containers; `leaves` and `perfect_nest` read them.

Rebuilding a `Seq` goes through `stmt.seq`, so sequences stay flat and a one-statement sequence
is that statement, exactly as the passes built them by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from compiler.errors import ScheduleError
from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S

Container = S.Seq | S.For | S.Attr
_Body = TypeVar("_Body", bound=S.For | S.Attr)


def children(node: S.Stmt) -> tuple[S.Stmt, ...]:
    """The direct sub-statements of `node`, in program order; () for a leaf."""
    if isinstance(node, S.Seq):
        return node.stmts
    if isinstance(node, S.For | S.Attr):
        return (node.body,)
    return ()


def map_children(node: S.Stmt, fn: Callable[[S.Stmt], S.Stmt]) -> S.Stmt:
    """`node` rebuilt with `fn` applied to each direct sub-statement (a leaf is returned as is).

    A `For` keeps its variable, extent and kind, an `Attr` its mark; a `Seq` is rebuilt with
    `stmt.seq` (results that are sequences are spliced in, a single result is returned alone).
    """
    if isinstance(node, S.Seq):
        return S.seq(*(fn(s) for s in node.stmts))
    if isinstance(node, S.For | S.Attr):
        return with_body(node, fn(node.body))
    return node


def with_body(node: _Body, body: S.Stmt) -> _Body:
    """The loop or mark `node` around a new `body`."""
    return dataclasses.replace(node, body=body)


def wrap_loops(loops: Iterable[tuple[E.Var, int]], body: S.Stmt) -> S.Stmt:
    """`body` inside serial loops (outermost first): the inverse of `perfect_nest` without marks."""
    for var, extent in reversed(list(loops)):
        body = S.For(var, extent, body)
    return body


def walk(node: S.Stmt) -> Iterator[S.Stmt]:
    """Every statement of `node`, itself included, pre-order (a container before its children)."""
    yield node
    for child in children(node):
        yield from walk(child)


def walk_loops(node: S.Stmt, loops: tuple[S.For, ...] = ()) -> Iterator[tuple[S.Stmt, tuple[S.For, ...]]]:
    """`walk` with the `For` loops enclosing each statement, outermost first (a loop is not in
    its own tuple); `loops` are taken as enclosing `node`."""
    yield node, loops
    inner = (*loops, node) if isinstance(node, S.For) else loops
    for child in children(node):
        yield from walk_loops(child, inner)


def post_order(node: S.Stmt, fn: Callable[[S.Stmt], S.Stmt]) -> S.Stmt:
    """Rebuild `node` bottom-up, applying `fn` to every statement after its children."""
    return fn(map_children(node, lambda child: post_order(child, fn)))


def pre_order(node: S.Stmt, fn: Callable[[S.Stmt], S.Stmt | None]) -> S.Stmt:
    """Rebuild `node` top-down: where `fn` returns a statement, it replaces the one it was given
    and is not visited further; where it returns None, the children are rewritten in turn."""
    out = fn(node)
    if out is not None:
        return out
    return map_children(node, lambda child: pre_order(child, fn))


def leaves(node: S.Stmt) -> list[S.Stmt]:
    """The leaf statements of `node` in program order."""
    return [s for s in walk(node) if not isinstance(s, Container)]


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
