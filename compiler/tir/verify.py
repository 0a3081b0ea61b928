"""The loop-IR verifier: raises IRError naming the stage, the problem and the statement.

`verify(stmt, where)` checks what holds of well-formed IR after lowering (`where="lower"`) and
after each pass of `compiler.build` (`where=` the pass's name):

- statement kinds: `Dma` only from inject_dma on, `Uop` only between tensorize and fold_kernels
  (which turns every one into a `Kernel`), `Kernel` from fold_kernels on, `Sync` from
  insert_tokens on; the marks a pass consumes (`pragma dma_copy`, `tensorize`, `pragma alu`) are
  gone after it, and virtual-thread loops after inject_virtual_threads.  A `Store` is allowed at
  every stage: one that no pass turned into a DMA or micro-op is refused by emission, with its
  own message ("is a pragma or tensorize missing?");
- loops: a known kind, an int extent >= 1, a variable not bound again inside its own loop;
- variables: every one an address, index or buffer base uses is bound by an enclosing loop (or,
  inside a kernel, by its own folded and explicit loops);
- sequences are flat (a `Seq` never directly holds a `Seq`: `stmt.seq` splices them);
- leaves: a Store has one index per dimension of its tensor and writes (and reads) only buffers
  the lowering allocated, when `buffers` is given; a Dma's queue, direction and memory type
  agree, its sizes are >= 1 and its stride >= 0; a Uop is a GEMM without an immediate or an ALU
  op without a reset; a Kernel folds at most two loops, each of extent >= 1, over variables of
  its own; a Sync pushes or pops between neighbouring queues.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from compiler.errors import IRError
from compiler.schedule.records import PRAGMAS
from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S
from compiler.tir.printer import print_ir
from compiler.tir.visit import walk_loops
from hw import isa

# The stages in pipeline order: the IR after lowering, then after each pass of compiler.build;
# "cpu" is the CPU target's IR after its lowering (compiler.lower.cpu), which no pass follows.
STAGES = ("lower", "inject_dma", "tensorize", "lower_alu", "fold_kernels", "insert_tokens",
          "inject_virtual_threads")
CPU = "cpu"
_LOOP_KINDS = ("serial", "vthread")
_CPU_LOOP_KINDS = ("serial", "vectorize")
_QUEUE_ORDER = {"load": 0, "compute": 1, "store": 2}
_SHOWN = 100  # characters of the offending statement in a message
VERIFY_ENV = "CODESIGN_VERIFY_IR"  # set (not "" or "0"): the compilers verify what they lower


def verifying() -> bool:
    """Whether compilation verifies the IR after each stage (CODESIGN_VERIFY_IR; the test suite
    sets it): the accelerator pipeline after lowering and every pass, the CPU after lowering."""
    return os.environ.get(VERIFY_ENV, "") not in ("", "0")


def verify(stmt: S.Stmt, where: str = "lower", buffers: Mapping[str, S.Buffer] | None = None) -> S.Stmt:
    """Check every invariant of the IR `stmt` as it stands after stage `where` (one of STAGES);
    `buffers` (the lowering's, by name) enables the check that stores and loads use them.
    Returns `stmt` unchanged so calls can be chained; raises IRError at the first violation."""
    if where == CPU:
        return _verify_cpu(stmt, buffers)
    if where not in STAGES:
        raise IRError(f"loop IR after {where}: unknown stage; the stages are {', '.join(STAGES)}, {CPU}")
    stage = STAGES.index(where)
    for node, loops in walk_loops(stmt):
        problem = _problem(node, loops, stage, buffers)
        if problem is not None:
            raise IRError(f"loop IR after {where}: {problem}, in `{_show(node)}`")
    return stmt


def _verify_cpu(stmt: S.Stmt, buffers: Mapping[str, S.Buffer] | None) -> S.Stmt:
    """The CPU lowering's IR: loops (serial or vectorized), flat sequences and stores only, with
    the stores' checks of the accelerator's "lower" stage."""
    for node, loops in walk_loops(stmt):
        problem = _cpu_problem(node, loops, buffers)
        if problem is not None:
            raise IRError(f"loop IR after {CPU} lowering: {problem}, in `{_show(node)}`")
    return stmt


def _cpu_problem(node: S.Stmt, loops: tuple[S.For, ...],
                 buffers: Mapping[str, S.Buffer] | None) -> str | None:
    if isinstance(node, S.For):
        return _loop_problem(node, {lp.var for lp in loops}, 0, _CPU_LOOP_KINDS)
    if isinstance(node, S.Seq | S.Store):
        return _problem(node, loops, 0, buffers)
    return f"{type(node).__name__} has no place in the CPU target's loop IR"


def _show(node: S.Stmt) -> str:
    """The statement's printed form, abbreviated to its first line and _SHOWN characters."""
    lines = print_ir(node).strip().splitlines() or [repr(node)]
    text = lines[0].strip() + (" ..." if len(lines) > 1 else "")
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _after(stage: int, name: str) -> bool:
    """Whether the IR at `stage` has gone through the pass `name`."""
    return stage >= STAGES.index(name)


def _problem(node: S.Stmt, loops: tuple[S.For, ...], stage: int,
             buffers: Mapping[str, S.Buffer] | None) -> str | None:
    """What is wrong with `node` (inside `loops`) at `stage`, or None."""
    bound = {lp.var for lp in loops}
    if isinstance(node, S.Seq):
        nested = any(isinstance(s, S.Seq) for s in node.stmts)
        return "a sequence directly inside a sequence" if nested else None
    if isinstance(node, S.For):
        return _loop_problem(node, bound, stage)
    if isinstance(node, S.Attr):
        return _mark_problem(node, stage)
    if isinstance(node, S.Store):
        return _store_problem(node, bound, stage, buffers)
    if isinstance(node, S.Dma):
        return _too_early(stage, "inject_dma", "DMA") or _dma_problem(node, bound)
    if isinstance(node, S.Uop):
        if _after(stage, "fold_kernels"):
            return "a micro-op outside a kernel after fold_kernels"
        return _too_early(stage, "tensorize", "micro-op") or _uop_problem(node, bound)
    if isinstance(node, S.Kernel):
        return _too_early(stage, "fold_kernels", "kernel") or _kernel_problem(node, bound)
    if isinstance(node, S.Sync):
        return _too_early(stage, "insert_tokens", "token") or _sync_problem(node)
    return f"{type(node).__name__} is not a loop-IR statement"


def _too_early(stage: int, made_by: str, what: str) -> str | None:
    return None if _after(stage, made_by) else f"a {what} before {made_by}, the pass that makes them"


def _unbound(used: Iterable[E.Var], bound: set[E.Var]) -> str | None:
    free = sorted({v.name for v in used if v not in bound})
    if not free:
        return None
    return f"variable{'s' if len(free) > 1 else ''} {', '.join(free)} not bound by an enclosing loop"


def _loop_problem(node: S.For, bound: set[E.Var], stage: int,
                  kinds: tuple[str, ...] = _LOOP_KINDS) -> str | None:
    if node.kind not in kinds:
        return f"loop kind {node.kind!r} is not one of {', '.join(kinds)}"
    if node.kind == "vthread" and _after(stage, "inject_virtual_threads"):
        return "a virtual-thread loop after inject_virtual_threads"
    if isinstance(node.extent, bool) or not isinstance(node.extent, int) or node.extent < 1:
        return f"loop {node.var} has extent {node.extent!r}, not an int >= 1"
    if node.var in bound:
        return f"variable {node.var} is bound again inside a loop over it"
    return None


def _mark_problem(node: S.Attr, stage: int) -> str | None:
    if node.key == "pragma":
        if node.value not in PRAGMAS:
            return f"unknown pragma {node.value!r}"
        consumer = "inject_dma" if node.value == "dma_copy" else "lower_alu"
    elif node.key == "tensorize":
        consumer = "tensorize"  # which intrinsics exist is the pass's to say (it names them)
    else:
        return f"unknown mark {node.key!r}"
    if _after(stage, consumer):
        return f"a {node.key} {node.value} mark after {consumer}, the pass that replaces them"
    return None


def _tensors(node: S.Store) -> list[tuple[Tensor, tuple[E.Expr, ...]]]:
    return [(node.tensor, node.indices), *((ld.tensor, ld.indices) for ld in E.loads(node.value))]


def _store_problem(node: S.Store, bound: set[E.Var], stage: int,
                   buffers: Mapping[str, S.Buffer] | None) -> str | None:
    used: set[E.Var] = set()
    for tensor, indices in _tensors(node):
        if len(indices) != len(tensor.shape):
            return f"{tensor.name} has {len(tensor.shape)} dimensions, indexed by {len(indices)}"
        if isinstance(tensor, S.Buffer):
            if buffers is not None and buffers.get(tensor.name) is not tensor:
                return f"buffer {tensor.name} is not one the lowering allocated"
            used |= set(tensor.base.coeffs)
        for i in indices:
            used |= E.free_vars(i)
    used |= E.free_vars(node.value)
    # inject_virtual_threads binds thread variables in DMAs and kernels only: a store left
    # under a thread loop keeps its variable, and emission reports the store itself
    if _after(stage, "inject_virtual_threads"):
        return None
    return _unbound(used, bound)


def _affine_vars(*forms: Affine | None) -> set[E.Var]:
    return {v for f in forms if f is not None for v in f.coeffs}


def _dma_problem(node: S.Dma, bound: set[E.Var]) -> str | None:
    want = "store" if not node.load else (
        "load" if node.memory_type in (isa.MemType.INP, isa.MemType.WGT) else "compute")
    if node.queue != want or (node.memory_type == isa.MemType.OUT) == node.load:
        way = "load" if node.load else "store"
        return f"a DMA {way} of {node.memory_type.name} on the {node.queue} queue"
    sizes = (node.y_size, node.x_size, node.y_stride)
    ints = all(isinstance(n, int) and not isinstance(n, bool) for n in sizes)
    if not ints or node.y_size < 1 or node.x_size < 1 or node.y_stride < 0:
        return f"DMA sizes y={node.y_size} x={node.x_size} stride={node.y_stride}"
    for pad in (node.pad_y, node.pad_x):
        if pad is not None and pad.low < 0:
            return f"DMA pad starts its valid range at {pad.low} < 0"
    starts = [p.start for p in (node.pad_y, node.pad_x) if p is not None]
    return _unbound(_affine_vars(node.dram, node.sram, *starts), bound)


def _uop_problem(node: S.Uop, bound: set[E.Var]) -> str | None:
    if node.kind not in ("gemm", "alu"):
        return f"micro-op kind {node.kind!r}"
    if node.kind == "gemm" and node.use_imm:
        return "a GEMM micro-op with an immediate"
    if node.kind == "alu" and node.reset:
        return "an ALU micro-op with a reset"
    return _unbound(_affine_vars(node.dst, node.src, node.wgt), bound)


def _kernel_problem(node: S.Kernel, bound: set[E.Var]) -> str | None:
    if len(node.folded) > 2:
        return f"a kernel folding {len(node.folded)} loops, more than the instruction's 2"
    own = [v for v, _ in (*node.folded, *node.explicit)]
    for var, extent in (*node.folded, *node.explicit):
        if isinstance(extent, bool) or not isinstance(extent, int) or extent < 1:
            return f"kernel loop {var} has extent {extent!r}, not an int >= 1"
        if var in bound or own.count(var) > 1:
            return f"variable {var} is bound again by the kernel's loops"
    return _uop_problem(node.uop, bound | set(own))


def _sync_problem(node: S.Sync) -> str | None:
    if node.action not in ("push", "pop"):
        return f"token action {node.action!r}"
    if node.src not in _QUEUE_ORDER or node.dst not in _QUEUE_ORDER:
        return f"a token between unknown queues {node.src} and {node.dst}"
    if abs(_QUEUE_ORDER[node.src] - _QUEUE_ORDER[node.dst]) != 1:
        return f"a token from {node.src} to {node.dst}, which are not neighbouring queues"
    return None
