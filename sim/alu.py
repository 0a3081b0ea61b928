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
from sim.scratchpads import Scratchpads, int_dtype


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
    return AluStep(cfg, insn, d, s, _alu_independent(d, None if insn.use_imm else s))


class AluStep:
    """One checked ALU instruction over fixed acc indices: one vectorized step when the
    iterations are independent (contiguous indices as slices), else one step per iteration."""

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Alu, d: np.ndarray, s: np.ndarray,
                 independent: bool) -> None:
        self.cfg, self.op, self.uops = cfg, insn.alu_opcode, int(d.size)
        self.imm: np.integer | None = np.int64(insn.imm) if insn.use_imm else None
        self.native = _NATIVE.get(self.op)
        if self.native is not None and insn.use_imm:
            self.imm = _native_imm(self.op, insn.imm, int_dtype(cfg.acc_bits))
        self.independent = independent
        if independent:
            self.d: np.ndarray | slice = _as_slice(d)
            self.s: np.ndarray | slice = _as_slice(s)
        else:
            self.pairs = list(zip(d.tolist(), s.tolist(), strict=True))

    def __call__(self, spads: Scratchpads) -> None:
        if self.independent:
            self._step(spads.acc, self.d, self.s)
        else:
            for dn, sn in self.pairs:
                self._step(spads.acc, dn, sn)

    def _step(self, acc: np.ndarray, dst: np.ndarray | slice | int, src: np.ndarray | slice | int) -> None:
        if self.native is not None:  # in acc's own type: min and max never leave it, + and * wrap
            b = self.imm if self.imm is not None else acc[src]
            if isinstance(dst, slice):
                self.native(acc[dst], b, out=acc[dst])  # numpy copies an overlapping operand first
            else:
                acc[dst] = self.native(acc[dst], b)
            return
        b = self.imm if self.imm is not None else acc[src].astype(np.int64)
        acc[dst] = alu_op(self.cfg, self.op, acc[dst].astype(np.int64), b).astype(acc.dtype)


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


def _as_slice(index: np.ndarray) -> np.ndarray | slice:
    """`index` as a slice when it counts up by one (a view instead of a gather), else itself."""
    if index.size and int(index[-1]) - int(index[0]) == index.size - 1 and (
        index.size == 1 or bool(np.all(np.diff(index) == 1))
    ):
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


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
