"""`fold_kernels`: perfect loop nests of micro-ops become instructions (`Kernel`).

Up to two loops fold into the GEMM/ALU instruction's affine loops (iter_out, iter_in with a
factor per index); the others are unrolled into the micro-op kernel, or stay loops of
instructions when the kernel would grow past `max_uops`.  The micro-ops of one kernel are
independent (GEMM accumulations commute exactly in integers; element-wise ALU operations touch
each element once), so the two loops to fold are the two largest.
"""

from __future__ import annotations

import dataclasses

from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.tir import stmt as S
from compiler.tir.visit import bind_affine, perfect_nest, pre_order, wrap_loops


def fold_kernels(body: S.Stmt, target: AcceleratorTarget) -> S.Stmt:
    limit = max(16, target.uop_depth // 8)

    def visit(node: S.Stmt) -> S.Stmt | None:
        # top-down: the outermost loop of a nest of micro-ops takes the whole nest
        if isinstance(node, S.Uop):
            return S.Kernel(node, (), ())
        if isinstance(node, S.For):
            loops, leaf = perfect_nest(node)
            if isinstance(leaf, S.Uop):
                return _kernel(loops, leaf, target, limit)
        return None

    return pre_order(body, visit)


def _kernel(loops: list[tuple[E.Var, int]], uop: S.Uop, target: AcceleratorTarget,
            limit: int) -> S.Stmt:
    for var, extent in loops:
        if extent == 1:  # a loop of one iteration: its variable is 0
            uop = dataclasses.replace(uop, dst=bind_affine(uop.dst, var, 0),
                                      src=bind_affine(uop.src, var, 0), wgt=bind_affine(uop.wgt, var, 0))
    loops = [(v, n) for v, n in loops if n > 1]
    for host in range(len(loops) + 1):
        inner = loops[host:]
        foldable = [lp for lp in inner if _can_fold(uop, lp, target)]
        chosen = sorted(sorted(foldable, key=lambda lp: -lp[1])[:2], key=inner.index)
        explicit = [lp for lp in inner if lp not in chosen]
        if _count(explicit) <= limit:
            return wrap_loops(loops[:host], S.Kernel(uop, tuple(chosen), tuple(explicit)))
    raise ScheduleError(f"stage {uop.stage}: micro-op kernel cannot be made small enough")  # pragma: no cover


def _can_fold(uop: S.Uop, loop: tuple[E.Var, int], target: AcceleratorTarget) -> bool:
    var, extent = loop
    coeffs = (uop.dst.coeff(var), uop.src.coeff(var), uop.wgt.coeff(var))
    return extent <= target.loop_max_iters and all(c >= 0 for c in coeffs)


def _count(loops: list[tuple[E.Var, int]]) -> int:
    n = 1
    for _, extent in loops:
        n *= extent
    return n
