"""`emit`: the final loop IR -> a Program, through `hw.program.ProgramBuilder`.

The host loops are walked with concrete values (the accelerator has no branches: its stream is
the unrolled schedule).  DMA pads are decided per tile.  Micro-op kernels are evaluated, shared
when identical, and placed once in micro-op memory by one LOAD UOP at the start (`plan_uops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.codegen.stream import Stream
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
                                    "the micro-op buffer; use smaller tiles")  # fmt: skip
        return begin, begin + len(dst)


class _Emitter:
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
        self.patterns: dict[int, _Pattern] = {}
        self.env: dict[E.Var, int] = {}

    def run(self, body: S.Stmt) -> Program:
        self.walk(body)
        self.stream.finish()
        if self.plan.uops:
            span = self.builder.uops(self.plan.uops)
            self.builder.load_uops(span, 0)
        for insn in self.stream.insns:
            self.builder.emit(insn)
        return self.builder.build()

    def walk(self, node: S.Stmt) -> None:
        if isinstance(node, S.Seq):
            for s in node.stmts:
                self.walk(s)
        elif isinstance(node, S.For):
            for i in range(node.extent):
                self.env[node.var] = i
                self.walk(node.body)
            del self.env[node.var]
        elif isinstance(node, S.Attr):
            self.walk(node.body)
        elif isinstance(node, S.Dma):
            self.dma(node)
        elif isinstance(node, S.Kernel):
            self.kernel(node)
        elif isinstance(node, S.Sync):
            if node.action == "push":
                self.stream.push(node.src, node.dst)
            else:
                self.stream.pop(node.src, node.dst)
        else:
            raise ScheduleError(f"cannot emit {type(node).__name__}: a pass left it in the IR "
                                "(is a pragma or tensorize missing?)")  # fmt: skip

    # -- DMA -------------------------------------------------------------------------------------
    def dma(self, d: S.Dma) -> None:
        env = self.env
        dram, sram = d.dram.evaluate(env), d.sram.evaluate(env)
        y0, y_valid, y1 = _pad(d.pad_y, d.y_size, env, d, self.target)
        x0, x_valid, x1 = _pad(d.pad_x, d.x_size, env, d, self.target)
        dram += y0 * d.y_stride + x0
        region = self.regions[d.tensor]
        base = region.offset // self.cfg.elem_bytes(d.memory_type) + dram
        cls = isa.Load if d.load else isa.Store
        self.stream.add(cls(memory_type=d.memory_type, sram_base=sram, dram_base=base,
                            y_size=y_valid, x_size=x_valid, x_stride=d.y_stride if d.y_size > 1
                            else x_valid, y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1))  # fmt: skip

    # -- kernels ---------------------------------------------------------------------------------
    def kernel(self, k: S.Kernel) -> None:
        p = self.patterns.get(id(k))
        if p is None:
            p = self.patterns[id(k)] = _pattern(k)
        env = self.env
        bases = [h.evaluate(env) for h in p.host]
        begin, end = self.plan.place(p.dst + bases[0], p.src + bases[1], p.wgt + bases[2])
        loops = p.factors + [(1, 0, 0, 0)] * (2 - len(p.factors))
        (n_out, d_out, s_out, w_out), (n_in, d_in, s_in, w_in) = loops
        common: dict[str, Any] = dict(uop_bgn=begin, uop_end=end, iter_out=n_out, iter_in=n_in,
                      dst_factor_out=d_out, dst_factor_in=d_in, src_factor_out=s_out,
                      src_factor_in=s_in)  # fmt: skip
        u = k.uop
        if u.kind == "gemm":
            self.stream.add(isa.Gemm(reset=u.reset, wgt_factor_out=w_out, wgt_factor_in=w_in, **common))
        else:
            self.stream.add(isa.Alu(alu_opcode=u.alu_op, use_imm=u.use_imm, imm=u.imm, **common))


def _pad(pad: S.DmaPad | None, size: int, env: dict[E.Var, int], d: S.Dma,
         target: AcceleratorTarget) -> tuple[int, int, int]:  # fmt: skip
    """(zeros before, elements read, zeros after) of one DMA dimension at this tile."""
    if pad is None:
        return 0, size, 0
    start = pad.start.evaluate(env)
    before = min(max(pad.low - start, 0), size)
    after = min(max(start + size - pad.high, 0), size)
    valid = size - before - after
    if valid <= 0:
        raise ScheduleError(f"dma_copy of stage {d.stage}: a tile lies entirely in the padding; "
                            "use larger tiles")  # fmt: skip
    if max(before, after) > target.max_pad:
        raise ScheduleError(f"dma_copy of stage {d.stage}: {max(before, after)} padding elements, more "
                            f"than the DMA's {target.max_pad}")  # fmt: skip
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
