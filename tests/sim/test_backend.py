"""`run_in`: a program run against a DRAM image its caller owns, updated in place, gives what
`run` gives on every backend."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.runtime.accel import conv_step
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from hw.program import Program
from sim.backend import SimulationError
from sim.backends import make_backend


def _program() -> tuple[Program, dict[str, np.ndarray]]:
    cfg = PRESETS["tiny"]
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (1, 8, 5, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (8, 8, 3, 3)).astype(np.int8)
    step = conv_step("conv", AcceleratorTarget(cfg), x.shape, w, rng.integers(-99, 99, 8),
                     rng.integers(1, 500, 8), strides=(1, 1), pads=(1,) * 4, shift=10,
                     clip=(-128, 127))
    return step.compiled.built.program, step.pack([x])


@pytest.mark.parametrize("name", ["fsim", "timing"])
def test_run_in_updates_the_callers_image_as_run_does(name):
    program, feeds = _program()
    backend = make_backend(name, PRESETS["tiny"])
    want = make_backend("fsim", PRESETS["tiny"]).run(program, feeds)
    dram = program.initial_dram(feeds)
    dram[program.region("out").offset] = 99  # stale bytes where the output goes
    stats = backend.run_in(program, dram)
    assert stats == backend.run(program, feeds).stats
    got = program.read_region(dram, "out")
    # fsim computes the output; timing computes no values and leaves zeros, not stale data
    np.testing.assert_array_equal(got, want.outputs["out"] if name == "fsim" else np.zeros_like(got))


@pytest.mark.parametrize("name", ["fsim", "timing"])
def test_run_in_needs_a_writeable_byte_image_large_enough(name):
    program, feeds = _program()
    backend = make_backend(name, PRESETS["tiny"])
    dram = program.initial_dram(feeds)
    with pytest.raises(TypeError, match="dram must be a 1-D uint8 numpy array"):
        backend.run_in(program, dram.view(np.int8))
    dram.setflags(write=False)
    with pytest.raises(TypeError, match="dram must be contiguous and writeable: the run updates it in place"):
        backend.run_in(program, dram)
    too_small = rf"the DRAM image has 64 bytes, the program needs {program.dram_bytes}"
    with pytest.raises(SimulationError, match=too_small):
        backend.run_in(program, np.zeros(64, np.uint8))
