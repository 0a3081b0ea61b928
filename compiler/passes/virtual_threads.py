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

from compiler.te import expr as E
from compiler.tir import stmt as S
from compiler.tir.visit import bind_affine, post_order


def inject_virtual_threads(body: S.Stmt) -> S.Stmt:
    def visit(node: S.Stmt) -> S.Stmt:
        if isinstance(node, S.For) and node.kind == "vthread":
            return _interleave(node.body, node.var, node.extent)
        return node

    return post_order(body, visit)


def _interleave(node: S.Stmt, var: E.Var, count: int) -> S.Stmt:
    if isinstance(node, S.For):
        return S.For(node.var, node.extent, _interleave(node.body, var, count), node.kind)
    if isinstance(node, S.Attr):
        return S.Attr(node.key, node.value, node.stage, _interleave(node.body, var, count))
    items: list[S.Stmt] = list(node.stmts) if isinstance(node, S.Seq) else [node]
    out: list[S.Stmt] = []
    for group in _tasks(items):
        if len(group) == 1 and isinstance(group[0], S.For | S.Attr | S.Seq):
            out.append(_interleave(group[0], var, count))
            continue
        for t in range(count):
            out.extend(bind(s, var, t) for s in group)
    return S.seq(*out) if out else S.Seq(())


def _tasks(items: list[S.Stmt]) -> list[list[S.Stmt]]:
    """Groups [pops] [one DMA or kernel] [pushes]; loops are groups of their own."""
    groups: list[list[S.Stmt]] = []
    current: list[S.Stmt] = []
    state = "pops"  # what the current group can still take: pops, then a leaf, then pushes
    for s in items:
        if isinstance(s, S.For | S.Attr | S.Seq):
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
            if state == "pushes" or any(not isinstance(x, S.Sync) for x in current):
                groups.append(current)
                current = []
            current.append(s)
            state = "leaf"
    if current:
        groups.append(current)
    return [g for g in groups if g]


def bind(node: S.Stmt, var: E.Var, value: int) -> S.Stmt:
    """A leaf statement with `var` fixed to `value` in every address."""
    if isinstance(node, S.Dma):
        return dataclasses.replace(
            node, dram=bind_affine(node.dram, var, value), sram=bind_affine(node.sram, var, value),
            pad_y=_bind_pad(node.pad_y, var, value), pad_x=_bind_pad(node.pad_x, var, value),
        )
    if isinstance(node, S.Kernel):
        u = node.uop
        uop = dataclasses.replace(u, dst=bind_affine(u.dst, var, value),
                                  src=bind_affine(u.src, var, value),
                                  wgt=bind_affine(u.wgt, var, value))  # fmt: skip
        return S.Kernel(uop, node.folded, node.explicit)
    if isinstance(node, S.For):
        return S.For(node.var, node.extent, bind(node.body, var, value), node.kind)
    if isinstance(node, S.Seq):
        return S.seq(*(bind(s, var, value) for s in node.stmts))
    return node


def _bind_pad(pad: S.DmaPad | None, var: E.Var, value: int) -> S.DmaPad | None:
    return None if pad is None else dataclasses.replace(pad, start=bind_affine(pad.start, var, value))
