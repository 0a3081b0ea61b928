"""Shared helpers: configs to compile for, and compile-run-compare on a backend."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ops.accel import compile_op
from hw.config import PRESETS, AcceleratorConfig
from sim.fsim import FunctionalSimulator

# A config none of the presets resembles: batch 2, 8x4 core, small buffers, 256-bit bus, token
# counters that saturate at 3 (pushes must wait).
ODD = PRESETS["tiny"].with_params(
    name="odd", batch=2, block_in=8, block_out=4, inp_bytes=4096, wgt_bytes=4096, acc_bytes=8192,
    uop_bytes=2048, bus_bits=256, max_burst_beats=4, token_counter_bits=2, cmd_queue_depth=8,
)
CONFIGS = [PRESETS["vta"], PRESETS["tiny"], PRESETS["rect"], ODD]


@pytest.fixture(params=CONFIGS, ids=[c.name for c in CONFIGS])
def any_cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    return request.param  # type: ignore[no-any-return]


def check_op(op, backend=None, knobs=None, seed=0, fsim_seed=None):  # type: ignore[no-untyped-def]
    """Compile `op`, run it, assert exact equality with its numpy reference; the run result."""
    compiled = compile_op(op, knobs)
    backend = backend or FunctionalSimulator(op.target.cfg, seed=fsim_seed)
    inputs = op.random_inputs(seed)
    result = backend.run(compiled.built.program, inputs)
    expected = op.reference(inputs)
    assert np.array_equal(result.outputs["out"], expected), (
        f"{op.describe()} knobs={compiled.knobs}: "
        f"{int(np.sum(result.outputs['out'] != expected))} of {expected.size} elements differ"
    )
    return result
