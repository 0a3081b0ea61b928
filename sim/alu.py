"""ALU instructions of the functional simulator, vectorized.

One vectorized step when no iteration reads or rewrites an accumulator written by an earlier one;
otherwise the iterations run in order (sequential semantics).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.backend import SimulationError
from sim.gemm import check_affine, decoded_uops, loop_indices
from sim.scratchpads import Lattice, Scratchpads, int_dtype, loop_lattice


def alu(cfg: AcceleratorConfig, spads: Scratchpads, insn: isa.Alu) -> int:
    """Execute one ALU instruction; returns the micro-ops executed."""
    step = prepare_alu(cfg, spads, insn)
    step(spads)
    return step.uops


def prepare_alu(cfg: AcceleratorConfig, spads: Scratchpads, insn: isa.Alu) -> AluStep:
    """Check `insn` against the micro-ops `spads` holds now; the step that executes it."""
    if insn.reset:
        raise SimulationError("ALU instructions cannot set reset")
    u = decoded_uops(cfg, spads, insn)
    check_affine(spads, isa.MemType.ACC, "ALU dst", insn, u["dst"], "dst")
    check_affine(spads, isa.MemType.ACC, "ALU src", insn, u["src"], "src")
    d = loop_indices(insn, u["dst"], insn.dst_factor_out, insn.dst_factor_in)
    s = loop_indices(insn, u["src"], insn.src_factor_out, insn.src_factor_in)
    loops = (insn.iter_out, insn.iter_in)
    d_lattice = loop_lattice(u["dst"], *loops, insn.dst_factor_out, insn.dst_factor_in)
    # distinct dst elements: with an immediate, no iteration reads what another wrote
    independent = (d_lattice is not None and insn.use_imm) or \
        _alu_independent(d, None if insn.use_imm else s)
    if not independent:
        return AluStep(cfg, insn, d, s, False)
    s_lattice = None
    if d_lattice is not None and not insn.use_imm:
        s_lattice = loop_lattice(u["src"], *loops, insn.src_factor_out, insn.src_factor_in,
                                 distinct=False)
    return AluStep(cfg, insn, d, s, True, (d_lattice, s_lattice))


class AluStep:
    """One checked ALU instruction over fixed acc indices: one vectorized step when the
    iterations are independent (on strided views where the indices form a lattice), else one
    step per iteration. min, max, + and * (and right shifts by an immediate) run in acc's own
    type, the others in int64."""

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Alu, d: np.ndarray, s: np.ndarray,
                 independent: bool, lattices: tuple[Lattice | None, Lattice | None] = (None, None)
                 ) -> None:
        """`d` and `s`: the acc indices of each iteration; `lattices` (independent only): `d`
        as a distinct Lattice and `s` as one, where they are (`sim.scratchpads.loop_lattice`),
        else None: `__call__` uses strided views where it has them."""
        self.cfg, self.op, self.uops = cfg, insn.alu_opcode, int(d.size)
        self.use_imm, self.independent = insn.use_imm, independent
        self.imm = np.int64(insn.imm)
        self.native, self.native_imm = _native(cfg, insn)
        self.d, self.s = d, s
        self.pairs = [] if independent else list(zip(d.tolist(), s.tolist(), strict=True))
        self.d_lattice, self.s_lattice = lattices

    def __call__(self, spads: Scratchpads) -> None:
        acc = spads.acc
        if not self.independent:
            for dn, sn in self.pairs:
                acc[dn] = self._apply(acc[dn], None if self.use_imm else acc[sn], acc.dtype)
            return
        if self.d_lattice is None:
            acc[self.d] = self._apply(acc[self.d], None if self.use_imm else acc[self.s], acc.dtype)
            return
        dst = self.d_lattice.view(acc)
        src = None
        if not self.use_imm:
            src = self.s_lattice.view(acc) if self.s_lattice else acc[self.s].reshape(dst.shape)
        if self.native is not None:  # in place; numpy copies an operand that overlaps dst first
            self.native(dst, self.native_imm if src is None else src, out=dst)
        else:
            dst[...] = self._apply(dst, src, acc.dtype)

    def _apply(self, a: np.ndarray, b: np.ndarray | None, dtype: Any) -> np.ndarray:
        if self.native is not None:
            return self.native(a, self.native_imm if b is None else b)  # type: ignore[no-any-return]
        operand = self.imm if b is None else b.astype(np.int64)
        return alu_op(self.cfg, self.op, a.astype(np.int64), operand).astype(dtype)


def _native(cfg: AcceleratorConfig, insn: isa.Alu) -> tuple[np.ufunc | None, np.integer | None]:
    """The ufunc that computes `insn` in acc's own type (and its immediate in that type), or
    (None, None): min and max never leave the type, the low acc_bits of a sum or product depend
    only on the low acc_bits of the operands, and a right shift by 0..acc_bits-1 is exact."""
    dtype = int_dtype(cfg.acc_bits)
    if insn.alu_opcode == isa.AluOp.SHR:
        amount = int(shift_amount(cfg, np.int64(insn.imm)))
        if insn.use_imm and amount >= 0:
            return np.right_shift, dtype(amount)
        return None, None
    ufunc = _NATIVE[insn.alu_opcode]
    return ufunc, _native_imm(insn.alu_opcode, insn.imm, dtype) if insn.use_imm else None


# Operations whose result in acc's own integer type equals the int64 result wrapped to acc_bits.
_NATIVE: dict[isa.AluOp, np.ufunc] = {
    isa.AluOp.MIN: np.minimum, isa.AluOp.MAX: np.maximum, isa.AluOp.ADD: np.add, isa.AluOp.MUL: np.multiply,
}


def _native_imm(op: isa.AluOp, imm: int, dtype: Any) -> np.integer:
    """The immediate in acc's type: clamped for min and max (acc values lie inside the type, so
    the result is the same), wrapped for + and * (the low acc_bits of a sum or product depend
    only on the low acc_bits of the operands)."""
    info = np.iinfo(dtype)
    if op in (isa.AluOp.MIN, isa.AluOp.MAX):
        return dtype(min(max(imm, info.min), info.max))  # type: ignore[no-any-return]
    half = 1 << (info.bits - 1)
    return dtype((imm + half) % (2 * half) - half)  # type: ignore[no-any-return]


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


def alu_op(cfg: AcceleratorConfig, op: isa.AluOp, a: np.ndarray, b: np.ndarray | np.integer) -> np.ndarray:
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


def shift_amount(cfg: AcceleratorConfig, b: np.ndarray | np.integer) -> np.ndarray:
    """SHR's amount: the low log2(acc_bits)+1 bits of the operand, read as signed."""
    bits = cfg.acc_bits.bit_length()  # log2(acc_bits) + 1
    half = 1 << (bits - 1)
    return ((np.asarray(b, dtype=np.int64) & ((1 << bits) - 1)) ^ half) - half
