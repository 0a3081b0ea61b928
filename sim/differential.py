"""Compare two runs of one Program bit for bit, and say where they first differ."""

from __future__ import annotations

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program
from sim.backend import RunResult


def first_difference(program: Program, cfg: AcceleratorConfig, ref: RunResult,
                     dut: RunResult) -> str | None:
    """None when outputs, final DRAM and functional counters agree; else what differs first.

    A DRAM difference is traced to the first STORE, in program order, that wrote a byte where
    the two images differ.
    """
    for name, want in ref.outputs.items():
        got = dut.outputs.get(name)
        if got is None or not np.array_equal(got, want):
            break
    else:
        name = ""
    diff = np.flatnonzero(ref.dram != dut.dram)
    if diff.size:
        where = _store_writing(program, cfg, diff)
        label = f"output {name!r}, " if name else ""
        return f"{label}DRAM byte {int(diff[0])} differs ({diff.size} bytes); {where}"
    if name:
        return f"output {name!r} differs"
    ref_stats, dut_stats = ref.stats.functional(), dut.stats.functional()
    for key, value in ref_stats.items():
        if dut_stats.get(key) != value:
            return f"counter {key}: {dut_stats.get(key)} != {value}"
    return None


def _store_writing(program: Program, cfg: AcceleratorConfig, bytes_: np.ndarray) -> str:
    elem = cfg.out_elem_bytes
    for index, insn in enumerate(program.decoded(cfg)):
        if not isinstance(insn, isa.Store) or insn.x_size == 0:
            continue
        rows = insn.dram_base + np.arange(insn.y_size)[:, None] * insn.x_stride
        starts = ((rows + np.arange(insn.x_size)[None, :]) * elem).reshape(-1)
        touched = (bytes_[:, None] >= starts[None, :]) & (bytes_[:, None] < starts[None, :] + elem)
        if touched.any():
            return f"first differing instruction: #{index} {isa.format_insn(insn)}"
    return "no STORE wrote there (a DMA wrote outside its window?)"
