"""`emit`: the final loop IR -> a Program, through `hw.program.ProgramBuilder`.

The host loops are walked with concrete values (the accelerator has no branches: its stream is
the unrolled schedule).  DMA pads are decided per tile.  Micro-op kernels are evaluated, shared
when identical, and placed once in micro-op memory by one LOAD UOP at the start (`plan_uops`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.codegen.accel.stream import Stream
from compiler.errors import ScheduleError
from compiler.lower.lower import LoweredFunc
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.tir import stmt as S
from hw import isa
from hw.program import Program, ProgramBuilder, Region


@dataclass
class _Pattern:
    """A kernel's explicit micro-ops relative to its base, and its folded loop factors."""

    dst: np.ndarray
    src: np.ndarray
    wgt: np.ndarray
    host: tuple[Affine, Affine, Affine]
    factors: list[tuple[int, int, int, int]]  # (extent, dst, src, wgt) per folded loop


class UopPlan:
    """Distinct micro-op kernels, placed back to back in micro-op memory."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.uops: list[isa.Uop] = []
        self.where: dict[tuple[int, ...], int] = {}

    def place(self, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray) -> tuple[int, int]:
        key = tuple(np.stack([dst, src, wgt]).ravel().tolist())
        begin = self.where.get(key)
        if begin is None:
            begin = self.where[key] = len(self.uops)
            self.uops.extend(isa.Uop(int(d), int(s), int(w)) for d, s, w in zip(dst, src, wgt, strict=True))
            if len(self.uops) > self.depth:
                raise ScheduleError(f"micro-op kernels need more than {self.depth} entries, the size of "
                                    "the micro-op buffer; use smaller tiles")
        return begin, begin + len(dst)


_Form = tuple[int, tuple[tuple[int, int], ...]]  # an Affine over loop slots: (const, (slot, coeff)...)
_Step = Callable[[], None]


class _Emitter:
    """Walks the IR with concrete loop values.  The IR is first turned into closures over a list
    of loop values (a loop variable is a slot), so the walk does no type dispatch and no
    variable hashing: programs of 10^5 instructions are common during schedule search.  A
    DMA's or kernel's instruction is built once per distinct operand values and reused."""

    def __init__(self, func: LoweredFunc, target: AcceleratorTarget) -> None:
        self.target, self.cfg = target, target.cfg
        self.builder = ProgramBuilder(self.cfg)
        self.regions: dict[str, Region] = {}
        for t in func.inputs:
            self.regions[t.name] = self.builder.region(t.name, t.shape, t.dtype, "input")
        for t in func.outputs:
            self.regions[t.name] = self.builder.region(t.name, t.shape, t.dtype, "output")
        self.stream = Stream()
        self.plan = UopPlan(target.uop_depth)
        self.values: list[int] = []  # the value of each loop slot
        self.slots: dict[E.Var, int] = {}  # the loops enclosing the statement being compiled

    def run(self, body: S.Stmt) -> Program:
        return self.stream_of(body).build()

    def stream_of(self, body: S.Stmt) -> ProgramBuilder:
        self.compile(body)()
        self.stream.finish()
        if self.plan.uops:
            span = self.builder.uops(self.plan.uops)
            self.builder.load_uops(span, 0)
        for insn in self.stream.insns:
            self.builder.emit(insn)
        return self.builder

    def compile(self, node: S.Stmt) -> _Step:
        if isinstance(node, S.Seq):
            return _sequence([self.compile(s) for s in node.stmts])
        if isinstance(node, S.For):
            return self.loop(node)
        if isinstance(node, S.Attr):
            return self.compile(node.body)
        if isinstance(node, S.Dma):
            return self.dma(node)
        if isinstance(node, S.Kernel):
            return self.kernel(node)
        if isinstance(node, S.Sync):
            fn = self.stream.push if node.action == "push" else self.stream.pop
            src, dst = node.src, node.dst
            return lambda: fn(src, dst)
        name = type(node).__name__

        def fail() -> None:
            raise ScheduleError(f"cannot emit {name}: a pass left it in the IR "
                                "(is a pragma or tensorize missing?)")

        return fail

    def loop(self, node: S.For) -> _Step:
        outer = self.slots.get(node.var)
        slot = self.slots[node.var] = len(self.values)
        self.values.append(0)
        body = self.compile(node.body)
        if outer is None:
            del self.slots[node.var]
        else:
            self.slots[node.var] = outer
        values, extent = self.values, node.extent

        def run() -> None:
            for i in range(extent):
                values[slot] = i
                body()

        return run

    def form(self, a: Affine) -> _Form:
        """`a` over the slots of the enclosing loops."""
        return a.const, tuple((self.slots[v], c) for v, c in a.coeffs.items())

    def forms(self, affines: list[Affine]) -> list[_Form] | E.Var:
        """The forms of `affines`, or the first variable no enclosing loop binds."""
        for a in affines:
            for v in a.coeffs:
                if v not in self.slots:
                    return v
        return [self.form(a) for a in affines]

    # -- DMA -------------------------------------------------------------------------------------
    def dma(self, d: S.Dma) -> _Step:
        starts = [Affine() if p is None else p.start for p in (d.pad_y, d.pad_x)]
        forms = self.forms([d.dram, d.sram, *starts])
        if isinstance(forms, E.Var):
            return _unbound(forms)
        elem_base = self.regions[d.tensor].offset // self.cfg.elem_bytes(d.memory_type)
        made: dict[tuple[int, ...], isa.Insn] = {}
        values, add = self.values, self.stream.add
        target = self.target

        def make(dram: int, sram: int, y_start: int, x_start: int) -> isa.Insn:
            y0, y_valid, y1 = _pad(d.pad_y, d.y_size, y_start, d, target)
            x0, x_valid, x1 = _pad(d.pad_x, d.x_size, x_start, d, target)
            cls = isa.Load if d.load else isa.Store
            return cls(memory_type=d.memory_type, sram_base=sram,  # type: ignore[no-any-return]
                       dram_base=elem_base + dram + y0 * d.y_stride + x0, y_size=y_valid,
                       x_size=x_valid, x_stride=d.y_stride if d.y_size > 1 else x_valid,
                       y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1)

        def run() -> None:
            key = tuple([_value(f, values) for f in forms])
            insn = made.get(key)
            if insn is None:
                insn = made[key] = make(*key)
            add(insn)

        return run

    # -- kernels ---------------------------------------------------------------------------------
    def kernel(self, k: S.Kernel) -> _Step:
        p = _pattern(k)
        forms = self.forms(list(p.host))
        if isinstance(forms, E.Var):
            return _unbound(forms)
        made: dict[tuple[int, ...], isa.Insn] = {}
        values, add = self.values, self.stream.add

        def run() -> None:
            key = tuple([_value(f, values) for f in forms])
            insn = made.get(key)
            if insn is None:
                insn = made[key] = self.kernel_insn(k, p, key)
            add(insn)

        return run

    def kernel_insn(self, k: S.Kernel, p: _Pattern, bases: tuple[int, ...]) -> isa.Insn:
        begin, end = self.plan.place(p.dst + bases[0], p.src + bases[1], p.wgt + bases[2])
        loops = p.factors + [(1, 0, 0, 0)] * (2 - len(p.factors))
        (n_out, d_out, s_out, w_out), (n_in, d_in, s_in, w_in) = loops
        common: dict[str, Any] = dict(uop_bgn=begin, uop_end=end, iter_out=n_out, iter_in=n_in,
                      dst_factor_out=d_out, dst_factor_in=d_in, src_factor_out=s_out,
                      src_factor_in=s_in)
        u = k.uop
        if u.kind == "gemm":
            return isa.Gemm(reset=u.reset, wgt_factor_out=w_out, wgt_factor_in=w_in, **common)
        return isa.Alu(alu_opcode=u.alu_op, use_imm=u.use_imm, imm=u.imm, **common)


def _sequence(steps: list[_Step]) -> _Step:
    def run() -> None:
        for step in steps:
            step()

    return run


def _unbound(var: E.Var) -> _Step:
    def fail() -> None:
        raise KeyError(var)  # as evaluating an Affine without a value for `var`

    return fail


def _value(form: _Form, values: list[int]) -> int:
    total = form[0]
    for slot, coeff in form[1]:
        total += coeff * values[slot]
    return total


def _pad(pad: S.DmaPad | None, size: int, start: int, d: S.Dma,
         target: AcceleratorTarget) -> tuple[int, int, int]:
    """(zeros before, elements read, zeros after) of one DMA dimension at this tile, whose
    first element has source index `start`."""
    if pad is None:
        return 0, size, 0
    before = min(max(pad.low - start, 0), size)
    after = min(max(start + size - pad.high, 0), size)
    valid = size - before - after
    if valid <= 0:
        raise ScheduleError(f"dma_copy of stage {d.stage}: a tile lies entirely in the padding; "
                            "use larger tiles")
    if max(before, after) > target.max_pad:
        raise ScheduleError(f"dma_copy of stage {d.stage}: {max(before, after)} padding elements, more "
                            f"than the DMA's {target.max_pad}")
    return before, valid, after


def _pattern(k: S.Kernel) -> _Pattern:
    u = k.uop
    forms = (u.dst, u.src, u.wgt)
    inner = {v for v, _ in k.folded} | {v for v, _ in k.explicit}
    grids = np.meshgrid(*[np.arange(n) for _, n in k.explicit], indexing="ij") if k.explicit else []
    arrays = []
    for f in forms:
        total = np.zeros(1 if not k.explicit else grids[0].size, dtype=np.int64)
        for (v, _), g in zip(k.explicit, grids, strict=True):
            total = total + f.coeff(v) * g.ravel()
        arrays.append(total)
    factors = [(n, u.dst.coeff(v), u.src.coeff(v), u.wgt.coeff(v)) for v, n in k.folded]
    host = tuple(f.without(inner) for f in forms)
    return _Pattern(arrays[0], arrays[1], arrays[2], host, factors)  # type: ignore[arg-type]


def emit(func: LoweredFunc, body: S.Stmt, target: AcceleratorTarget) -> Program:
    return _Emitter(func, target).run(body)


def emit_builder(func: LoweredFunc, body: S.Stmt, target: AcceleratorTarget) -> ProgramBuilder:
    """`emit` up to the encoding: the builder holding the regions, micro-ops and instructions,
    whose `build()` is `emit`'s Program (a sweep encodes one stream for many configs with
    `ProgramBuilder.copy_for`)."""
    return _Emitter(func, target).stream_of(body)
