"""ALU instructions of the functional simulator, vectorized.

One vectorized step when no iteration reads or rewrites an accumulator written by an earlier one;
otherwise the iterations run in order (sequential semantics).
"""
from __future__ import annotations

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.backend import SimulationError
from sim.gemm import check_affine, decoded_uops, loop_indices
from sim.scratchpads import Scratchpads


def alu(cfg: AcceleratorConfig, spads: Scratchpads, insn: isa.Alu) -> int:
    """Execute one ALU instruction; returns the micro-ops executed."""
    if insn.reset:
        raise SimulationError("ALU instructions cannot set reset")
    u = decoded_uops(cfg, spads, insn)
    check_affine(spads, isa.MemType.ACC, "ALU dst", insn, u["dst"], "dst")
    check_affine(spads, isa.MemType.ACC, "ALU src", insn, u["src"], "src")
    d = loop_indices(insn, u["dst"], insn.dst_factor_out, insn.dst_factor_in)
    s = loop_indices(insn, u["src"], insn.src_factor_out, insn.src_factor_in)
    acc = spads.acc

    def step(dst: np.ndarray | int, src: np.ndarray | int) -> None:
        b = np.int64(insn.imm) if insn.use_imm else acc[src].astype(np.int64)
        acc[dst] = alu_op(cfg, insn.alu_opcode, acc[dst].astype(np.int64), b).astype(acc.dtype)

    if _alu_independent(d, None if insn.use_imm else s):
        step(d, s)
    else:
        for dn, sn in zip(d.tolist(), s.tolist(), strict=True):
            step(dn, sn)
    return int(d.size)


def _alu_independent(d: np.ndarray, s: np.ndarray | None) -> bool:
    """True when no iteration rewrites, or reads, an acc element an earlier one wrote."""
    if not d.size:
        return True
    top = int(d.max()) if s is None else int(max(d.max(), s.max()))
    writer = np.full(top + 1, -1, dtype=np.int64)  # the last iteration writing each element
    writer[d] = np.arange(d.size)
    if np.count_nonzero(writer >= 0) != d.size:  # an element written twice (a scatter, not a sort)
        return False
    if s is None:
        return True
    w = writer[s]
    return not np.any((w >= 0) & (w < np.arange(d.size)))


def alu_op(cfg: AcceleratorConfig, op: isa.AluOp, a: np.ndarray, b: np.ndarray | np.int64) -> np.ndarray:
    """One ALU operation on int64 lanes (result not yet wrapped to acc_bits)."""
    if op == isa.AluOp.MIN:
        return np.minimum(a, b)
    if op == isa.AluOp.MAX:
        return np.maximum(a, b)
    if op == isa.AluOp.ADD:
        return a + b
    if op == isa.AluOp.MUL:
        return a * b
    amount = shift_amount(cfg, b)
    return np.where(amount >= 0, a >> np.maximum(amount, 0), a << np.maximum(-amount, 0))


def shift_amount(cfg: AcceleratorConfig, b: np.ndarray | np.int64) -> np.ndarray:
    """SHR's amount: the low log2(acc_bits)+1 bits of the operand, read as signed."""
    bits = cfg.acc_bits.bit_length()  # log2(acc_bits) + 1
    half = 1 << (bits - 1)
    return ((np.asarray(b, dtype=np.int64) & ((1 << bits) - 1)) ^ half) - half
