"""`inject_virtual_threads`: interleave the tasks of virtual threads into one stream.

A virtual-thread loop disappears: each task under it (a DMA or kernel with the token pops before
it and the pushes after it) is repeated once per thread, with the thread variable bound, so the
threads' tasks alternate: load(t0), load(t1), gemm(t0), gemm(t1), ...  Loops inside keep their
place (their extents do not depend on the thread).  Buffers already hold one copy per thread
(their base is affine in the thread variable), so thread t's tasks use its own copy, and each
thread's token protocol, inserted before this pass, stays balanced.
"""

from __future__ import annotations

import dataclasses
import math

from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.tir import stmt as S
from compiler.tir.visit import bind_affine, children, leaves, map_children, post_order


def inject_virtual_threads(body: S.Stmt, target: AcceleratorTarget) -> S.Stmt:
    _check_thread_count(body, target)

    def visit(node: S.Stmt) -> S.Stmt:
        if isinstance(node, S.For) and node.kind == "vthread":
            return _interleave(node.body, node.var, node.extent)
        return node

    return post_order(body, visit)


def _interleave(node: S.Stmt, var: E.Var, count: int) -> S.Stmt:
    if isinstance(node, S.For | S.Attr):  # loops inside keep their place
        return map_children(node, lambda body: _interleave(body, var, count))
    items = _flatten(node)
    out: list[S.Stmt] = []
    for group in _tasks(items):
        if len(group) == 1 and isinstance(group[0], S.For | S.Attr | S.Seq):
            out.append(_interleave(group[0], var, count))
            continue
        for t in range(count):
            out.extend(bind(s, var, t) for s in group)
    return S.seq(*out) if out else S.Seq(())


def _check_thread_count(body: S.Stmt, target: AcceleratorTarget) -> None:
    """Each thread may leave one token outstanding on a queue: a token counter must hold them
    all, or the interleaved stream can deadlock on a full counter."""

    def visit(node: S.Stmt, nest: tuple[S.For, ...]) -> None:
        if isinstance(node, S.For) and node.kind == "vthread":
            nest = (*nest, node)
            total = math.prod(lp.extent for lp in nest)
            if total > target.token_capacity:
                names = " x ".join(f"{lp.var.name} ({lp.extent})" for lp in nest)
                raise ScheduleError(
                    f"virtual threads {names} = {total} threads can leave {total} tokens "
                    f"outstanding on one queue; the token counters hold {target.token_capacity} "
                    f"(token_counter_bits={target.cfg.token_counter_bits})")
        for child in children(node):
            visit(child, nest)

    visit(body, ())


def _flatten(node: S.Stmt) -> list[S.Stmt]:
    """The statements of `node` with nested sequences and single-iteration loops spliced in: a
    token placed around them (a hoisted chain's pop, a carried edge's pop) must join the task
    of the statement it guards, not wait for every thread's."""
    if isinstance(node, S.For) and node.extent == 1 and node.kind == "serial":
        return _flatten(bind(node.body, node.var, 0))
    if not isinstance(node, S.Seq):
        return [node]
    return [leaf for s in node.stmts for leaf in _flatten(s)]


def _tasks(items: list[S.Stmt]) -> list[list[S.Stmt]]:
    """Groups [pops] [DMAs, kernels or token-free loops of one queue] [pushes]: a thread's
    whole task on one queue (its loads of a step, say) stays together, so the next thread's
    task never stands between it and its push.  Loops holding tokens are groups of their own."""
    groups: list[list[S.Stmt]] = []
    current: list[S.Stmt] = []
    state = "pops"  # what the current group can still take: pops, then a leaf, then pushes
    for s in items:
        if isinstance(s, S.For | S.Attr | S.Seq) and _has_sync(s):
            if current:
                groups.append(current)
            groups.append([s])
            current, state = [], "pops"
        elif isinstance(s, S.Sync) and s.action == "pop":
            if state != "pops":
                groups.append(current)
                current = []
            current.append(s)
            state = "pops"
        elif isinstance(s, S.Sync):
            current.append(s)
            state = "pushes"
        else:
            leaves = [x for x in current if not isinstance(x, S.Sync)]
            if state == "pushes" or (leaves and _queue(leaves[0]) != _queue(s)):
                groups.append(current)
                current = []
            current.append(s)
            state = "leaf"
    if current:
        groups.append(current)
    return [g for g in groups if g]


def _queue(node: S.Stmt) -> str | None:
    """The queue of a leaf, or of the first leaf inside a token-free loop."""
    first = leaves(node)
    return S.queue_of(first[0]) if first else None


def _has_sync(node: S.Stmt) -> bool:
    """Whether a token lies inside `node`: a loop without one is a single task (a loop of DMAs
    or kernels), repeated per thread as a whole so the pops before it stay with it."""
    return any(isinstance(x, S.Sync) for x in leaves(node))


def bind(node: S.Stmt, var: E.Var, value: int) -> S.Stmt:
    """`node` with `var` fixed to `value` in the address of every DMA and kernel in it."""
    return post_order(node, lambda leaf: _bind_leaf(leaf, var, value))


def _bind_leaf(node: S.Stmt, var: E.Var, value: int) -> S.Stmt:
    if isinstance(node, S.Dma):
        return dataclasses.replace(
            node, dram=bind_affine(node.dram, var, value), sram=bind_affine(node.sram, var, value),
            pad_y=_bind_pad(node.pad_y, var, value), pad_x=_bind_pad(node.pad_x, var, value),
        )
    if isinstance(node, S.Kernel):
        u = node.uop
        uop = dataclasses.replace(u, dst=bind_affine(u.dst, var, value),
                                  src=bind_affine(u.src, var, value),
                                  wgt=bind_affine(u.wgt, var, value))
        return S.Kernel(uop, node.folded, node.explicit)
    return node


def _bind_pad(pad: S.DmaPad | None, var: E.Var, value: int) -> S.DmaPad | None:
    return None if pad is None else dataclasses.replace(pad, start=bind_affine(pad.start, var, value))
