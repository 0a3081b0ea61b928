"""`AcceleratorTarget`: what the accelerator offers the compiler, built from the config alone.

Scopes with their capacities and element shapes, the GEMM intrinsic declared in the
tensor-expression language, the ALU operations and the DMA rules.  Nothing in te/ or ops/ reads
a config: they ask the target.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum
from hw import isa
from hw.config import AcceleratorConfig


@dataclass(frozen=True)
class Scope:
    """One on-chip buffer as the compiler sees it: elements of `lanes` values of `dtype`."""

    name: str
    memory_type: isa.MemType
    depth: int  # elements
    lanes: tuple[int, int]  # the two innermost tensor dimensions one element holds
    dtype: str


@dataclass(frozen=True)
class GemmIntrinsic:
    """acc[b, o] += inp[b, i] * wgt[o, i] over batch x block_out x block_in, as a compute."""

    inp: Tensor
    wgt: Tensor
    out: Tensor


ALU_OPS = {"+": isa.AluOp.ADD, "min": isa.AluOp.MIN, "max": isa.AluOp.MAX, ">>": isa.AluOp.SHR,
           "*": isa.AluOp.MUL}


class AcceleratorTarget:
    """The accelerator described by `cfg`."""

    name = "accel"
    dma_max_dims = 2
    loop_max_iters = (1 << isa.LOOP_ITER_BITS) - 1
    max_pad = (1 << isa.PAD_BITS) - 1
    imm_range = (-(1 << (isa.ALU_IMM_BITS - 1)), (1 << (isa.ALU_IMM_BITS - 1)) - 1)
    alu_ops = ALU_OPS

    def __init__(self, cfg: AcceleratorConfig) -> None:
        self.cfg = cfg
        dt = {8: "int8", 16: "int16", 32: "int32"}
        self.inp_dtype, self.wgt_dtype = dt[cfg.inp_bits], dt[cfg.wgt_bits]
        self.acc_dtype, self.out_dtype = dt[cfg.acc_bits], dt[cfg.out_bits]
        self.scopes = {
            "inp": Scope("inp", isa.MemType.INP, cfg.inp_depth, (cfg.batch, cfg.block_in),
                         self.inp_dtype),
            "wgt": Scope("wgt", isa.MemType.WGT, cfg.wgt_depth, (cfg.block_out, cfg.block_in),
                         self.wgt_dtype),
            "acc": Scope("acc", isa.MemType.ACC, cfg.acc_depth, (cfg.batch, cfg.block_out),
                         self.acc_dtype),
        }
        self.uop_depth = cfg.uop_depth
        # tokens one queue can hold outstanding: each virtual thread may leave one there
        self.token_capacity = (1 << cfg.token_counter_bits) - 1

    @property
    def batch(self) -> int:
        return self.cfg.batch

    @property
    def block_in(self) -> int:
        return self.cfg.block_in

    @property
    def block_out(self) -> int:
        return self.cfg.block_out

    @functools.cached_property
    def gemm(self) -> GemmIntrinsic:
        """The GEMM core's operation, in the same language as the operators."""
        inp = placeholder((self.batch, self.block_in), self.inp_dtype, "inp")
        wgt = placeholder((self.block_out, self.block_in), self.wgt_dtype, "wgt")
        k = reduce_axis(self.block_in, "k")
        acc = self.acc_dtype
        out = compute((self.batch, self.block_out),
                      lambda b, o: sum(E.cast(acc, inp[b, k]) * E.cast(acc, wgt[o, k]), k),
                      "gemm")
        return GemmIntrinsic(inp, wgt, out)

    def scope(self, name: str) -> Scope:
        return self.scopes[name]

    def acc_load_type(self, dtype: str) -> isa.MemType | None:
        """The LOAD that brings a DRAM tensor of `dtype` into acc, or None when none can."""
        if dtype == self.acc_dtype:
            return isa.MemType.ACC
        acc8 = getattr(isa.MemType, "ACC_8BIT", None)
        if acc8 is not None and dtype == self.inp_dtype:
            return acc8  # type: ignore[no-any-return]
        return None
