"""No burst crosses a 4 KiB boundary (AXI): programs whose loads of every memory type, stores
and instruction fetches straddle one give the same outputs on fsim, timing and rtl, and the
same cycles on timing and rtl.  The harness stops a run on a crossing burst, so a run that
passes saw none; the read requests it recorded show the bursts cut at the boundary."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS, AcceleratorConfig
from sim.fsim import FunctionalSimulator
from sim.rtl.backend import RtlSimulator
from sim.timing import TimingSimulator
from tests.sim.rtl.stub_accel import needs_verilator
from tests.sim.straddling import PAGE, crossing_dmas, straddling
from tests.sim.test_timing import STRESS

# tiny, vta and rect, and a 256-bit bus with 4-beat bursts (STRESS)
CONFIGS = [PRESETS["tiny"], PRESETS["vta"], PRESETS["rect"], STRESS]
SEEDS = range(6)
pytestmark = needs_verilator


@pytest.fixture(scope="module", params=CONFIGS, ids=[c.name for c in CONFIGS])
def cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    return request.param  # type: ignore[no-any-return]


def test_straddling_programs_agree_on_every_backend(cfg):
    rtl, timing, fsim = RtlSimulator(cfg), TimingSimulator(cfg), FunctionalSimulator(cfg)
    crossings: Counter[isa.MemType] = Counter()
    split = 0
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
    assert set(crossings) == set(isa.MemType)  # every memory type has rows across a boundary ...
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
