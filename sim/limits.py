"""Limits every simulator enforces before it starts work, so that no Program, however
malformed, makes one of them allocate without bound or run without end.

Micro-op iterations are the only work a single instruction can multiply (a DMA is bounded by
its scratchpad, a program by its length): one GEMM of maximal loop extents asks for
2**28 * uop_depth iterations, whose index arrays alone would need terabytes in fsim and hours
of simulated cycles.  `sim.validate` refuses such a program, naming the instruction and the
limit, on every backend alike (so the three agree on it).
"""

from __future__ import annotations

from dataclasses import dataclass

from hw.errors import InputError


@dataclass(frozen=True)
class Limits:
    """`insn_uops`: micro-op iterations (iter_out * iter_in * micro-ops) one GEMM or ALU
    instruction may run; fsim's index arrays grow with it (8 bytes per iteration and array).
    `program_uops`: micro-op iterations of a whole program; the simulated cycles grow with it."""

    insn_uops: int = 1 << 24
    program_uops: int = 1 << 34

    def __post_init__(self) -> None:
        for name in ("insn_uops", "program_uops"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"limit {name} must be a positive int, not {value!r}")


DEFAULT_LIMITS = Limits()
