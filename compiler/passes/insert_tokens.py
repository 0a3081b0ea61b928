"""`insert_tokens`: dependency-token pushes and pops between the load, compute and store queues.

TVM's CoProcSync algorithm (reference/vta.md §5.7): between consecutive statements of different
queues, a push after the first and a pop before the second; for a loop whose body starts and ends
on different queues, the loop-carried edge (a push at the end of the body, a pop at its start),
with a push before the loop so the first iteration's pop succeeds and a pop after it that drains
the last push.  Virtual-thread loops are transparent here: each thread gets its own protocol,
and `inject_virtual_threads` interleaves them.  Load and store are not neighbours: a token
between them is relayed through compute.
"""

from __future__ import annotations

from compiler.tir import stmt as S

_ORDER = {"load": 0, "compute": 1, "store": 2}


def insert_tokens(body: S.Stmt) -> S.Stmt:
    node, _, _ = _sync(body)
    return node


def _sync(node: S.Stmt) -> tuple[S.Stmt, str | None, str | None]:
    """(node with tokens, queue of its first statement, queue of its last)."""
    if isinstance(node, S.Seq):
        return _sync_seq(list(node.stmts))
    if isinstance(node, S.For):
        body, first, last = _sync(node.body)
        if node.kind == "vthread" or node.extent == 1 or first is None or first == last:
            return S.For(node.var, node.extent, body, node.kind), first, last
        assert last is not None
        carried = S.For(node.var, node.extent, S.seq(*_pop(last, first), body, *_push(last, first)))
        return S.seq(*_push(last, first), carried, *_pop(last, first)), last, first
    if isinstance(node, S.Attr):
        body, first, last = _sync(node.body)
        return S.Attr(node.key, node.value, node.stage, body), first, last
    queue = S.queue_of(node)
    return node, queue, queue


def _sync_seq(stmts: list[S.Stmt]) -> tuple[S.Stmt, str | None, str | None]:
    out: list[S.Stmt] = []
    first = last = None
    for s in stmts:
        node, f, lq = _sync(s)
        if f is None:
            out.append(node)
            continue
        if last is not None and last != f:
            out.extend(_push(last, f))
            out.extend(_pop(last, f))
        out.append(node)
        first = first or f
        last = lq
    return S.seq(*out) if out else S.Seq(()), first, last


def _push(src: str, dst: str) -> list[S.Stmt]:
    """Push from `src` to `dst`; through compute when they are not neighbours."""
    if abs(_ORDER[src] - _ORDER[dst]) == 2:
        return [S.Sync("push", src, "compute"), S.Sync("pop", src, "compute"),
                S.Sync("push", "compute", dst)]  # fmt: skip
    return [S.Sync("push", src, dst)]


def _pop(src: str, dst: str) -> list[S.Stmt]:
    if abs(_ORDER[src] - _ORDER[dst]) == 2:
        return [S.Sync("pop", "compute", dst)]
    return [S.Sync("pop", src, dst)]
