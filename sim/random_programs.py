"""Seeded random Programs for differential testing (fsim vs RTL, schedule vs schedule).

A program is a sequence of tasks, each `LOAD INP/WGT -> compute ops -> STORE`, with the token
protocol of a double-buffered pipeline: task t uses SRAM half t % 2 of inp and wgt, so the loads
of task t+1 may overlap the compute of task t.  Everything else is random: window sizes, strides,
padding, micro-op loops and factors, GEMM reset, ALU ops and immediates, accumulator loads
of int32 (LOAD ACC) or int8 (LOAD ACC_8BIT, sign-extended) data, where results are stored,
NOPs that only relay tokens on the load and store modules, and empty GEMM/ALU loops that still
carry token flags.  Every access is in range, so any difference between backends
is a bug.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program, ProgramBuilder, Region
from sim.scratchpads import int_dtype

_ROWS = _COLS = 8  # every DRAM tensor is an 8 x 8 grid of elements
_SPAN = 64  # SRAM elements used per half (inp, wgt) and in acc


@dataclass(frozen=True)
class RandomProgram:
    seed: int
    program: Program
    inputs: dict[str, np.ndarray]


def random_program(cfg: AcceleratorConfig, seed: int, *, tasks: int | None = None) -> RandomProgram:
    gen = _Generator(cfg, seed)
    return RandomProgram(seed, gen.build(tasks or gen.rng.randint(1, 5)), gen.inputs)


class _Generator:
    def __init__(self, cfg: AcceleratorConfig, seed: int) -> None:
        for kind in ("inp", "wgt"):
            if getattr(cfg, f"{kind}_depth") < 2 * _SPAN:
                raise ValueError(f"random programs need {2 * _SPAN} {kind} elements")
        if cfg.acc_depth < _SPAN or cfg.uop_depth < 16:
            raise ValueError(f"random programs need {_SPAN} acc elements and 16 micro-ops")
        self.cfg, self.rng = cfg, random.Random(seed)
        np_rng = np.random.default_rng(seed)
        self.b = ProgramBuilder(cfg)
        shapes = {"A": (cfg.batch, cfg.block_in, cfg.inp_bits),
                  "W": (cfg.block_out, cfg.block_in, cfg.wgt_bits),
                  "X": (cfg.batch, cfg.block_out, cfg.acc_bits),
                  "X8": (cfg.batch, cfg.block_out, cfg.inp_bits)}
        self.inputs = {}
        self.regions: dict[str, Region] = {}
        for name, (rows, cols, bits) in shapes.items():
            lim = 1 << (bits - 1) if name != "X" else 1 << 20
            data = np_rng.integers(-lim, lim, (_ROWS, _COLS, rows, cols)).astype(int_dtype(bits))
            self.inputs[name] = data
            self.regions[name] = self.b.region(name, data.shape, data.dtype, "input")
        out_shape = (_ROWS, _COLS, cfg.batch, cfg.block_out)
        self.regions["C"] = self.b.region("C", out_shape, int_dtype(cfg.out_bits), "output")
        self.uop_next = 0
        self.out_lent = False

    # -- task structure ------------------------------------------------------------------------
    def build(self, tasks: int) -> Program:
        for t in range(tasks):
            half = t % 2
            if t >= 2 and self.rng.random() < 0.15:  # the WAR token on a load-stage NOP
                self.b.nop(isa.Module.LOAD, pop_next=True)
                self._load(isa.MemType.INP, "A", half)
            else:
                self._load(isa.MemType.INP, "A", half, pop_next=t >= 2)
            self._load(isa.MemType.WGT, "W", half, push_next=True)
            kinds = ("gemm", "gemm", "alu", "acc", "acc8")
            ops = [self.rng.choice(kinds) for _ in range(self.rng.randint(1, 4))]
            for i, op in enumerate(ops):
                first, last = i == 0, i == len(ops) - 1
                flags = {"pop_prev": first, "pop_next": first and self._reclaim(),
                         "push_prev": last and t + 2 < tasks, "push_next": last}
                getattr(self, f"_{op}")(half, flags)
            self._store()
        self.b.finish(pop_next=self._reclaim())
        return self.b.build()

    def _reclaim(self) -> bool:
        lent, self.out_lent = self.out_lent, False
        return lent

    # -- DMA ----------------------------------------------------------------------------------
    def _window(self) -> tuple[int, int, int, int]:
        """(y_size, x_size, x_stride, elem_offset) of a window inside an 8 x 8 tensor."""
        y, x = self.rng.randint(1, 4), self.rng.randint(1, 4)
        stride = self.rng.randint(x, _COLS)
        offset = self.rng.randint(0, _ROWS * _COLS - ((y - 1) * stride + x))
        return y, x, stride, offset

    def _load(self, m: isa.MemType, region: str, half: int, **flags: bool) -> None:
        y, x, stride, offset = self._window()
        pads = tuple(self.rng.choice((0, 0, 1, 2)) for _ in range(4))
        footprint = (pads[0] + y + pads[1]) * (pads[2] + x + pads[3])
        base = half * _SPAN + self.rng.randint(0, _SPAN - footprint)
        self.b.load(m, self.regions[region], base, y_size=y, x_size=x, x_stride=stride,
                    elem_offset=offset, pads=pads, **flags)  # type: ignore[arg-type]

    def _acc(self, half: int, flags: dict[str, bool], *, m: isa.MemType = isa.MemType.ACC) -> None:
        y, x, stride, offset = self._window()
        pads = tuple(self.rng.choice((0, 0, 1)) for _ in range(4))
        footprint = (pads[0] + y + pads[1]) * (pads[2] + x + pads[3])
        region = self.regions["X8" if m == isa.MemType.ACC_8BIT else "X"]
        self.b.load(m, region, self.rng.randint(0, _SPAN - footprint),
                    y_size=y, x_size=x, x_stride=stride, elem_offset=offset,
                    pads=pads, **flags)  # type: ignore[arg-type]

    def _acc8(self, half: int, flags: dict[str, bool]) -> None:
        self._acc(half, flags, m=isa.MemType.ACC_8BIT)

    def _store(self) -> None:
        y, x, stride, offset = self._window()
        relay = self.rng.random() < 0.15  # the RAW token on a store-stage NOP before the STORE
        if relay:
            self.b.nop(isa.Module.STORE, pop_prev=True)
        self.b.store(self.regions["C"], self.rng.randint(0, _SPAN - y * x), y_size=y, x_size=x,
                     x_stride=stride, elem_offset=offset, pop_prev=not relay,
                     push_prev=True)
        self.out_lent = True

    # -- compute -------------------------------------------------------------------------------
    def _loops(self) -> dict[str, int]:
        r = self.rng
        empty = r.random() < 0.05  # no iterations at all: only the token flags act
        return {"iter_out": r.randint(1, 3), "iter_in": 0 if empty else r.randint(1, 3)}

    def _factors(self, name: str, loops: dict[str, int]) -> tuple[dict[str, int], int]:
        out, inner = self.rng.randint(0, 3), self.rng.randint(0, 3)
        reach = max(loops["iter_out"] - 1, 0) * out + max(loops["iter_in"] - 1, 0) * inner
        return {f"{name}_factor_out": out, f"{name}_factor_in": inner}, reach

    def _kernel(self, uops: list[isa.Uop]) -> tuple[int, int]:
        """Load `uops` into the micro-op buffer (compute side); returns (uop_bgn, uop_end)."""
        if self.uop_next + len(uops) > min(self.cfg.uop_depth, 64):
            self.uop_next = 0
        span = self.b.uops(uops)
        self.b.load_uops(span, sram_base=self.uop_next)
        self.uop_next += len(uops)
        return self.uop_next - len(uops), self.uop_next

    def _gemm(self, half: int, flags: dict[str, bool]) -> None:
        loops = self._loops()
        fields = dict(loops)
        reach = {}
        for name in ("dst", "src", "wgt"):
            factors, reach[name] = self._factors(name, loops)
            fields.update(factors)
        r = self.rng
        uops = [isa.Uop(dst=r.randint(0, _SPAN - 1 - reach["dst"]),
                        src=half * _SPAN + r.randint(0, _SPAN - 1 - reach["src"]),
                        wgt=half * _SPAN + r.randint(0, _SPAN - 1 - reach["wgt"]))
                for _ in range(r.randint(1, 4))]
        bgn, end = self._kernel(uops)
        self.b.gemm(reset=r.random() < 0.2, uop_bgn=bgn, uop_end=end, **fields, **flags)

    def _alu(self, half: int, flags: dict[str, bool]) -> None:
        loops = self._loops()
        fields: dict[str, int] = dict(loops)
        reach = {}
        for name in ("dst", "src"):
            factors, reach[name] = self._factors(name, loops)
            fields.update(factors)
        r = self.rng
        op = r.choice(list(isa.AluOp))
        imm = r.randint(-40, 40) if op == isa.AluOp.SHR else r.randint(-(1 << 15), (1 << 15) - 1)
        uops = [isa.Uop(dst=r.randint(0, _SPAN - 1 - reach["dst"]),
                        src=r.randint(0, _SPAN - 1 - reach["src"]))
                for _ in range(r.randint(1, 3))]
        bgn, end = self._kernel(uops)
        self.b.alu(uop_bgn=bgn, uop_end=end, alu_opcode=op, use_imm=r.random() < 0.5, imm=imm,
                   **fields, **flags)
