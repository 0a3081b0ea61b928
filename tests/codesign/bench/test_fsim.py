import pytest

from codesign.bench.fsim import tiling_for
from hw.config import PRESETS


def test_tiling_fits_every_preset(preset_cfg):
    t = tiling_for(preset_cfg)
    t.check(preset_cfg)  # raises if the tiles do not fit
    assert t.virtual_threads == 2
    assert t.m_blocks * preset_cfg.batch == 3136 and t.k_blocks * preset_cfg.block_in == 576


def test_vta_tiling_uses_whole_k_tiles():
    t = tiling_for(PRESETS["vta"])
    assert (t.m_tile, t.k_tile, t.n_tile) == (28, 36, 4)


def test_no_tiling_is_an_error():
    with pytest.raises(ValueError, match="no tiling of a 3136x2x64 GEMM fits the buffers of tiny"):
        tiling_for(PRESETS["tiny"], (3136, 2, 64))  # K smaller than one block
