import numpy as np
import pytest

from hw.config import PRESETS
from sim.fsim import FunctionalSimulator
from sim.workloads import GemmTiling, blocked_gemm, long_load, resident_gemm


@pytest.mark.parametrize("tiling", [
    GemmTiling(4, 4, 4, 4, 4, 4, 1),   # one tile
    GemmTiling(8, 6, 4, 2, 3, 2, 1),   # many tiles, no double buffering
    GemmTiling(8, 6, 4, 2, 3, 2, 2),   # two threads, acc double-buffered
    GemmTiling(6, 4, 2, 3, 1, 1, 2),   # odd tile counts
])
@pytest.mark.parametrize("seed", [None, 5])
def test_blocked_gemm_matches_numpy(preset_cfg, tiling, seed):
    work = blocked_gemm(preset_cfg, tiling, seed=3)
    result = FunctionalSimulator(preset_cfg, seed=seed).run(work.program, work.inputs)
    assert np.array_equal(result.outputs["C"], work.expected["C"])
    assert result.stats.gemm_uops == tiling.macs_per_block
    assert work.macs == tiling.macs_per_block * preset_cfg.macs_per_cycle


def test_tiling_errors():
    with pytest.raises(ValueError, match="k_blocks=5 is not a multiple of k_tile=2"):
        GemmTiling(4, 5, 4, 4, 2, 4).check(PRESETS["tiny"])
    with pytest.raises(ValueError, match="tiles need 512 inp elements, the buffer holds 256"):
        GemmTiling(64, 4, 4, 64, 4, 4, 2).check(PRESETS["tiny"])


def test_resident_gemm_and_long_load(preset_cfg):
    work = resident_gemm(preset_cfg, m_tile=8, k_tile=2, n_tile=2, repeats=4)
    result = FunctionalSimulator(preset_cfg).run(work.program, work.inputs)
    assert np.array_equal(result.outputs["C"], work.expected["C"])
    assert result.stats.gemm_uops == 4 * 8 * 2 * 2
    work = long_load(preset_cfg, elems=32)
    result = FunctionalSimulator(preset_cfg).run(work.program, work.inputs)
    assert result.stats.wgt_load_bytes == 32 * preset_cfg.wgt_elem_bytes
