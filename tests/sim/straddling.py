"""Programs whose DMAs straddle a 4 KiB boundary: random programs (sim.random_programs) with
every region moved across one, for the tests of the 4 KiB rule on fsim, timing and rtl."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np

from compiler.runtime.arena import relocate
from hw import isa
from hw.config import BURST_BOUNDARY_BYTES, AcceleratorConfig
from hw.program import Program
from sim.random_programs import random_program

PAGE = BURST_BOUNDARY_BYTES


def straddling(cfg: AcceleratorConfig, seed: int) -> tuple[Program, dict[str, np.ndarray]]:
    """A random program (sim.random_programs) with every region (data, micro-ops,
    instructions) moved across a 4 KiB boundary: where the region is read or written, inside
    a DMA row chosen at random (or at a seeded distance into the region)."""
    rp = random_program(cfg, seed)
    rng = random.Random(seed)
    steps, rows = _steps_and_rows(rp.program, cfg)
    offsets, cursor = {}, 0
    for r in rp.program.regions:
        step = steps[r.name]
        inside = sorted({k for a, b in rows[r.name] for k in range(a // step + 1, -(-b // step))})
        into = step * rng.choice(inside or [max(1, r.nbytes // 2 // step)])
        boundary = (-(-(cursor + into) // PAGE)) * PAGE
        offsets[r.name] = boundary - into
        cursor = boundary - into + r.nbytes
    return relocate(rp.program, offsets, cfg, -(-cursor // PAGE) * PAGE), rp.inputs


def _steps_and_rows(program: Program, cfg: AcceleratorConfig
                    ) -> tuple[dict[str, int], dict[str, list[tuple[int, int]]]]:
    """How far each region may move (whole elements of every memory type that addresses it;
    whole instructions, 16 bytes, for the micro-op table and the instructions), and the byte
    ranges of its DMA rows, from its start."""
    steps = {r.name: 16 if r.role in ("uops", "insns") else 1 for r in program.regions}
    rows: dict[str, list[tuple[int, int]]] = {r.name: [] for r in program.regions}
    for insn in isa.decode(program.insns, cfg):
        if isinstance(insn, isa.MemInsn) and insn.x_size and insn.y_size:
            eb = cfg.elem_bytes(insn.memory_type)
            r = next(r for r in program.regions if r.offset <= insn.dram_base * eb < r.offset + r.nbytes)
            steps[r.name] = math.lcm(steps[r.name], eb)
            for y in range(insn.y_size):
                start = (insn.dram_base + y * insn.x_stride) * eb - r.offset
                rows[r.name].append((start, start + insn.x_size * eb))
    return steps, rows


def crossing_dmas(program: Program, cfg: AcceleratorConfig) -> Counter[isa.MemType]:
    """LOADs and STOREs, by memory type, with a row whose bytes span a 4 KiB boundary (where one
    burst for the whole row would cross it)."""
    count: Counter[isa.MemType] = Counter()
    for insn in isa.decode(program.insns, cfg):
        if isinstance(insn, isa.MemInsn) and insn.x_size:
            eb = cfg.elem_bytes(insn.memory_type)
            starts = ((insn.dram_base + y * insn.x_stride) * eb for y in range(insn.y_size))
            count[insn.memory_type] += any(s // PAGE != (s + insn.x_size * eb - 1) // PAGE
                                           for s in starts)
    return count
