"""The functional simulator's buffers: LOAD ACC_8BIT sign-extends int8 lanes into acc."""

from __future__ import annotations

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS, AcceleratorConfig
from sim.backend import SimulationError
from sim.scratchpads import Scratchpads, elem_layout, sram_of

TINY = PRESETS["tiny"]


def _spads(cfg: AcceleratorConfig, data: np.ndarray) -> Scratchpads:
    dram = np.zeros(4096, dtype=np.uint8)
    raw = data.view(np.uint8).reshape(-1)
    dram[: raw.size] = raw
    return Scratchpads(cfg, dram)


def test_acc_8bit_layout_and_buffer():
    assert elem_layout(TINY, isa.MemType.ACC_8BIT) == (np.int8, (TINY.batch, TINY.block_out))
    assert sram_of(isa.MemType.ACC_8BIT) == isa.MemType.ACC
    for m in (isa.MemType.UOP, isa.MemType.INP, isa.MemType.WGT, isa.MemType.ACC):
        assert sram_of(m) == m


@pytest.mark.parametrize("cfg", [TINY, PRESETS["rect"]], ids=["tiny", "rect"])
def test_load_acc_8bit_sign_extends_with_padding_and_stride(cfg):
    rng = np.random.default_rng(3)
    shape = (cfg.batch, cfg.block_out)
    data = rng.integers(-128, 128, (3, 4, *shape)).astype(np.int8)
    data[0, 1].flat[:3] = (-128, 127, -1)
    spads = _spads(cfg, data)
    spads.acc[:] = 12345  # acc outside the window keeps its values; pads become zero
    load = isa.Load(memory_type=isa.MemType.ACC_8BIT, sram_base=2, dram_base=1, y_size=2,
                    x_size=2, x_stride=4, y_pad_0=1, x_pad_1=1)
    assert spads.load(load) == 4 * cfg.out_elem_bytes
    want = np.zeros((3, 3, *shape), dtype=np.int32)
    want[1:, :2] = data[:2, 1:3]
    np.testing.assert_array_equal(spads.acc[2:11], want.reshape(-1, *shape))
    assert (spads.acc[:2] == 12345).all() and (spads.acc[11:] == 12345).all()
    assert spads.acc[5].flat[:3].tolist() == [-128, 127, -1]


def test_load_acc_8bit_out_of_range_names_the_acc_buffer():
    spads = _spads(TINY, np.zeros(1, dtype=np.int8))
    load = isa.Load(memory_type=isa.MemType.ACC_8BIT, sram_base=255, x_size=2, x_stride=2)
    with pytest.raises(SimulationError, match="LOAD reaches ACC index 256, outside the ACC "
                                              "buffer of 256 elements"):
        spads.load(load)
    far = isa.Load(memory_type=isa.MemType.ACC_8BIT, dram_base=1023, x_size=2, x_stride=2)
    with pytest.raises(SimulationError, match=r"DRAM access up to byte 4099 \(element 1024 of 4 "
                                              r"bytes\) is outside the 4096-byte DRAM"):
        spads.load(far)


def test_lattice_views_the_indexed_elements_and_refuses_others():
    from sim.scratchpads import lattice

    sram = np.arange(100 * 2 * 3, dtype=np.int32).reshape(100, 2, 3)
    index = 5 + np.arange(3)[:, None, None] * 20 + np.arange(4)[None, :, None] * 2 + np.arange(2)
    view = lattice(index).view(sram)
    assert np.array_equal(view, sram[index])
    view[...] = -1  # a view: writes reach the SRAM
    assert np.count_nonzero(sram == -1) == index.size * 6
    assert lattice(np.array([1, 3, 4])) is None  # not affine
    assert lattice(np.array([[0, 1], [1, 2]])) is None  # affine, but element 1 twice
    assert lattice(np.array([[0, 1], [0, 1]]), distinct=False).steps == (0, 1)  # read: repeats allowed
    assert lattice(np.array([3, 2])) is None  # steps must not go down
