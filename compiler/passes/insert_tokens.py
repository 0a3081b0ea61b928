"""`insert_tokens`: dependency-token pushes and pops between the load, compute and store queues.

TVM's CoProcSync algorithm (src/tir/transforms/coproc_sync.cc): between consecutive statements of different
queues, a push after the first and a pop before the second; for a loop whose body starts and ends
on different queues, the loop-carried edge (a push at the end of the body, a pop at its start),
with a push before the loop so the first iteration's pop succeeds and a pop after it that drains
the last push.  Load and store are not neighbours: a token between them is relayed through
compute.  Virtual-thread loops are transparent: each thread gets its own protocol, and
`inject_virtual_threads` interleaves them.

One refinement: the compute->load carried edge of a load/GEMM loop only protects the inp/wgt
buffers, which only GEMMs read.  Its entry push and exit pop are hoisted out of the enclosing
loops (up to the virtual-thread or program level), so the loads of the next tile wait for the
last GEMM of this one, not for its epilogue and store: the chain of tokens runs on across tiles.
"""

from __future__ import annotations

from compiler.tir import stmt as S
from compiler.tir.visit import walk, with_body

_ORDER = {"load": 0, "compute": 1, "store": 2}
_HOISTABLE = ("compute", "load")
Pair = tuple[str, str]


def insert_tokens(body: S.Stmt) -> S.Stmt:
    node, _, _, fix = _sync(body)
    return _place(node, fix)


def _sync(node: S.Stmt) -> tuple[S.Stmt, str | None, str | None, list[Pair]]:
    """(node with tokens, queue of its first statement, of its last, hoisted fix-up pairs)."""
    if isinstance(node, S.Seq):
        return _sync_seq(list(node.stmts))
    if isinstance(node, S.For):
        return _sync_for(node)
    if isinstance(node, S.Attr):
        body, first, last, fix = _sync(node.body)
        return with_body(node, body), first, last, fix
    queue = S.queue_of(node)
    return node, queue, queue, []


def _sync_for(node: S.For) -> tuple[S.Stmt, str | None, str | None, list[Pair]]:
    body, first, last, fix = _sync(node.body)
    if node.kind == "vthread":  # each thread places its own fix-ups
        return with_body(node, _place(body, fix)), first, last, []
    if node.extent == 1 or first is None or first == last:
        return with_body(node, body), first, last, fix
    assert last is not None
    if any(_pair_in(body, p) for p in fix):  # a hoisted chain would mix with this loop's tokens
        body, fix = _place(body, fix), []
    if (last, first) == _HOISTABLE and not _pair_in(body, _HOISTABLE):
        chain = S.Sync("pop", last, first, True), body, S.Sync("push", last, first, True)
        return with_body(node, S.seq(*chain)), first, last, [*fix, (last, first)]
    carried = with_body(node, S.seq(*_pop(last, first), body, *_push(last, first)))
    if abs(_ORDER[last] - _ORDER[first]) == 2:  # store -> load: the fix-ups relay through compute
        return S.seq(*_push(last, first), carried, *_pop(last, first)), last, first, fix
    return _place(carried, [(last, first)]), last, first, fix


def _sync_seq(stmts: list[S.Stmt]) -> tuple[S.Stmt, str | None, str | None, list[Pair]]:
    out: list[S.Stmt] = []
    first = last = None
    fixes: list[Pair] = []
    for s in stmts:
        node, f, lq, fix = _sync(s)
        fixes.extend(fix)
        if f is None:
            out.append(node)
            continue
        if last is not None and last != f and (last, f) not in fix:
            out.extend(_push(last, f))
            out.extend(_pop(last, f))
        out.append(node)
        first = first or f
        last = lq
    return S.seq(*out) if out else S.Seq(()), first, last, fixes


def _place(node: S.Stmt, fix: list[Pair]) -> S.Stmt:
    """`node` with the entry push before it and the exit pop after it of each fix-up pair."""
    before: list[S.Stmt] = [S.Sync("push", src, dst, True) for src, dst in fix]
    after: list[S.Stmt] = [S.Sync("pop", src, dst, True) for src, dst in reversed(fix)]
    return S.seq(*before, node, *after) if fix else node


def _pair_in(node: S.Stmt, pair: Pair) -> bool:
    """Whether `node` holds a token of `pair` other than those of a hoisted chain."""
    return any(isinstance(s, S.Sync) and (s.src, s.dst) == pair and not s.chain for s in walk(node))


def _push(src: str, dst: str) -> list[S.Stmt]:
    """Push from `src` to `dst`; through compute when they are not neighbours."""
    if abs(_ORDER[src] - _ORDER[dst]) == 2:
        return [S.Sync("push", src, "compute"), S.Sync("pop", src, "compute"),
                S.Sync("push", "compute", dst)]
    return [S.Sync("push", src, dst)]


def _pop(src: str, dst: str) -> list[S.Stmt]:
    if abs(_ORDER[src] - _ORDER[dst]) == 2:
        return [S.Sync("pop", "compute", dst)]
    return [S.Sync("pop", src, dst)]
