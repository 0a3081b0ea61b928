"""The functional simulator's buffers: LOAD ACC_8BIT sign-extends int8 lanes into acc; lattices
(strided views instead of gathers) only where the index is one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _distinct(index: np.ndarray) -> bool:
    return np.unique(index).size == index.size


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(-3, 12)), min_size=1, max_size=3),
       st.integers(0, 40), st.booleans())
def test_lattice_refuses_repeats_exactly_as_a_sort_would(axes, first, distinct):
    """Distinct elements are shown by the digits argument (no sort) or else by np.unique: the
    verdict is the sort's either way."""
    from sim.scratchpads import lattice

    shape = tuple(n for n, _ in axes)
    index = np.full(shape, first)
    for k, (n, step) in enumerate(axes):
        index = index + np.arange(n).reshape((-1,) + (1,) * (len(axes) - 1 - k)) * step
    found = lattice(index, distinct=distinct)
    steps_ok = all(step >= 0 or n == 1 for n, step in axes)
    want = steps_ok and (_distinct(index) or not distinct)
    assert (found is not None) == want
    if found is not None:
        assert np.array_equal(found.view(np.arange(200)), index)  # the view holds these elements


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=0, max_size=5), st.integers(0, 4), st.integers(0, 4),
       st.integers(0, 9), st.integers(0, 9), st.booleans(), st.booleans())
def test_loop_lattice_equals_the_lattice_of_the_loop_index(base, iter_out, iter_in, out, inner,
                                                          arithmetic, distinct):
    """loop_lattice finds from the micro-ops alone what lattice finds on the whole loop index."""
    from sim.gemm import loop_indices
    from sim.scratchpads import lattice, loop_lattice

    if arithmetic and base:  # half the cases: micro-ops in steps (of any sign), as compilers emit
        base = [base[0] + k * (base[-1] % 7 - 2) for k in range(len(base))]
        base = [b - min(base) for b in base]
    u = np.array(base, dtype=np.int64)
    insn = isa.Alu(iter_out=iter_out, iter_in=iter_in)
    index = loop_indices(insn, u, out, inner)
    want = lattice(index.reshape(iter_out, iter_in, -1), distinct) if index.size else None
    got = loop_lattice(u, iter_out, iter_in, out, inner, distinct)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert (got.first, got.shape, got.steps) == (want.first, want.shape, want.steps)


def test_distinct_lattices_the_digits_argument_does_not_show():
    from sim.scratchpads import lattice, loop_lattice

    index = np.arange(3)[:, None] * 2 + np.arange(2)[None, :] * 3  # 0 3 2 5 4 7: distinct
    assert lattice(index).steps == (2, 3)
    assert lattice(np.arange(4)[:, None] * 2 + np.arange(3)[None, :] * 3) is None  # 6 twice
    assert loop_lattice(np.array([0, 3]), 3, 1, 2, 0).steps == (2, 0, 3)
    assert loop_lattice(np.array([0, 3, 6]), 4, 1, 2, 0) is None


@pytest.mark.parametrize("seed", range(6))
def test_distinct_elements_agrees_with_unique(seed):
    """`distinct_elements` (a sort) says what `np.unique` says, on any shape."""
    from sim.scratchpads import distinct_elements

    rng = np.random.default_rng(seed)
    for shape in [(0,), (1,), (7,), (3, 4), (2, 3, 5)]:
        for high in (4, 1 << 20):
            index = rng.integers(0, high, shape)
            assert distinct_elements(index) == (np.unique(index).size == index.size)
    assert distinct_elements(np.arange(12).reshape(3, 4)[:, ::-1])
    assert not distinct_elements(np.array([[5, 1], [2, 5]]))


def test_a_first_fsim_run_does_not_import_numpy_ma():
    """`np.unique`'s first call imports numpy.ma (~0.05 s): fsim's first run of a model must not
    pay it (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = ("import sys\nfrom hw.config import PRESETS\nfrom sim.fsim import FunctionalSimulator\n"
            "from sim.workloads import GemmTiling, blocked_gemm\n"
            "work = blocked_gemm(PRESETS['vta'], GemmTiling(4, 6, 4, 2, 3, 2, 2))\n"
            "FunctionalSimulator(PRESETS['vta']).run(work.program, work.inputs)\n"
            "print('numpy.ma' in sys.modules)\n")
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env, cwd=root)
    assert out.stdout.strip() == "False"
