"""No burst crosses a 4 KiB boundary (AXI): programs whose loads of every memory type, stores
and instruction fetches straddle one give the same outputs on fsim, timing and rtl, and the
same cycles on timing and rtl.  The harness stops a run on a crossing burst, so a run that
passes saw none; the read requests it recorded show the bursts cut at the boundary."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from compiler.runtime.arena import relocate
from hw import isa
from hw.config import BURST_BOUNDARY_BYTES, PRESETS, AcceleratorConfig
from hw.program import Program
from sim.fsim import FunctionalSimulator
from sim.random_programs import random_program
from sim.rtl.backend import RtlSimulator
from sim.timing import TimingSimulator
from tests.sim.rtl.stub_accel import needs_verilator
from tests.sim.test_timing import STRESS

PAGE = BURST_BOUNDARY_BYTES
# tiny, vta and rect, and a 256-bit bus with 4-beat bursts (STRESS)
CONFIGS = [PRESETS["tiny"], PRESETS["vta"], PRESETS["rect"], STRESS]
SEEDS = range(6)
pytestmark = needs_verilator


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


def crossing_dmas(program: Program, cfg: AcceleratorConfig) -> int:
    """LOADs and STOREs with a row whose bytes span a 4 KiB boundary (where one burst for the
    whole row would cross it)."""
    count = 0
    for insn in isa.decode(program.insns, cfg):
        if isinstance(insn, isa.MemInsn) and insn.x_size:
            eb = cfg.elem_bytes(insn.memory_type)
            starts = ((insn.dram_base + y * insn.x_stride) * eb for y in range(insn.y_size))
            count += any(s // PAGE != (s + insn.x_size * eb - 1) // PAGE for s in starts)
    return count


@pytest.fixture(scope="module", params=CONFIGS, ids=[c.name for c in CONFIGS])
def cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    return request.param  # type: ignore[no-any-return]


def test_straddling_programs_agree_on_every_backend(cfg):
    rtl, timing, fsim = RtlSimulator(cfg), TimingSimulator(cfg), FunctionalSimulator(cfg)
    crossings = split = 0
    for seed in SEEDS:
        program, inputs = straddling(cfg, seed)
        insns = program.insn_region
        assert insns.offset // PAGE != (insns.offset + insns.nbytes - 1) // PAGE
        want = fsim.run(program, inputs)
        got, reads = rtl.run_read_requests(program, inputs)
        for name, value in want.outputs.items():
            np.testing.assert_array_equal(got.outputs[name], value, err_msg=f"seed {seed}: {name}")
        assert got.stats == timing.run(program).stats, f"seed {seed}"
        assert got.stats.cycles and got.stats.out_store_bytes == want.stats.out_store_bytes
        first = reads[:, 1]
        last = first + (reads[:, 2] + 1) * cfg.bus_bytes - 1
        assert np.all(first // PAGE == last // PAGE), f"seed {seed}: a read burst crosses 4 KiB"
        crossings += crossing_dmas(program, cfg)
        split += int(np.count_nonzero(((last + 1) % PAGE == 0) & (reads[:, 2] + 1 < cfg.max_burst_beats)))
    assert crossings >= 2 * len(SEEDS)  # the programs do ask for rows across the boundary ...
    assert split >= len(SEEDS)  # ... and read bursts end there short of max_burst_beats


def test_straddling_insns_are_fetched_in_split_bursts(cfg):
    program, inputs = straddling(cfg, 1)
    insns = program.insn_region
    assert insns.offset // PAGE != (insns.offset + insns.nbytes - 1) // PAGE
    got, reads = RtlSimulator(cfg).run_read_requests(program, inputs)
    words = (insns.offset + np.arange(0, insns.nbytes, cfg.bus_bytes)) // cfg.bus_bytes
    fetch = reads[np.isin(reads[:, 1] // cfg.bus_bytes, words)]
    assert int((fetch[:, 2] + 1).sum()) == len(words)  # every instruction word, once
    assert PAGE * (insns.offset // PAGE + 1) in fetch[:, 1].tolist()  # a burst starts there
    assert got.stats == TimingSimulator(cfg).run(program).stats
