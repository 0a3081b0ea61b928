"""The program cache gives compile_op's Program, byte for byte, on configs that share a compile
key; candidates are ranked by the estimate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.sweep.ranker import Ranker
from codesign.sweep.schedules import COLD, ProgramCache, Timer, choose, compile_key, ranking
from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec, Epilogue, compile_op
from compiler.target.accel import AcceleratorTarget
from hw.config import PRESETS
from hw.program import ProgramBuilder, ProgramError
from sim.backends import make_backend

EP = Epilogue(channel_multiplier=True, scaled_bias=True)


def _program(build, op, knobs):
    """The Program built, or the ScheduleError's message."""
    try:
        return build(op, knobs)
    except ScheduleError as exc:
        return str(exc)


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return (a.fingerprint == b.fingerprint and np.array_equal(a.insns, b.insns) and a.regions == b.regions
            and a.dram_bytes == b.dram_bytes and a.constants.keys() == b.constants.keys()
            and all(np.array_equal(a.constants[k], b.constants[k]) for k in a.constants))


@pytest.mark.parametrize("make", [
    lambda t: Conv2d(Conv2dSpec(1, 16, 8, 8, 32, 3, 1, 1, EP), t),
    lambda t: Dense(DenseSpec(1, 64, 40, EP), t),
])
def test_cached_programs_equal_compile_ops(make):
    base = PRESETS["tiny"]
    configs = [base, dataclasses.replace(base, inp_bytes=4096, acc_bytes=16384, bus_bits=128, mem_inflight=8),
               dataclasses.replace(base, wgt_bytes=8192, acc_bytes=2048)]
    assert len({compile_key(c) for c in configs}) == 1
    cache = ProgramCache()
    for cfg in configs:
        op = make(AcceleratorTarget(cfg))
        points = ranking(op)
        default = points.default
        for knobs in [default, *points[:6]]:
            assert _same(_program(cache.program, op, knobs),
                         _program(lambda o, k: compile_op(o, k).built.program, op, knobs))
    assert cache.hits > 0 and cache.misses > 0


def test_ranked_points_fit_and_follow_the_estimate():
    op = Conv2d(Conv2dSpec(1, 16, 8, 8, 32, 3, 1, 1, EP), AcceleratorTarget(PRESETS["tiny"]))
    points = ranking(op)
    default = points.default
    costs = [op.estimate(p) for p in points]
    assert all(c is not None for c in costs) and costs == sorted(costs)
    assert default == op.default_knobs() and default in points


def test_copy_for_refuses_other_element_sizes():
    builder = ProgramBuilder(PRESETS["tiny"])
    with pytest.raises(ProgramError, match="a program written for tiny cannot be built for rect: "
                                           "their element sizes differ"):
        builder.copy_for(PRESETS["rect"])


def _choose(op, measured, ranker):
    cfg = op.target.cfg
    backend = make_backend("timing", cfg)
    return choose(op, backend, lambda s: float(s.cycles), ProgramCache(), Timer(), measured, ranker), backend


@pytest.mark.parametrize("warm", [0, 10**6])
def test_choose_measures_the_default_the_best_estimate_and_at_most_a_few_more(warm):
    op = Conv2d(Conv2dSpec(1, 16, 8, 8, 32, 3, 1, 1, EP), AcceleratorTarget(PRESETS["tiny"]))
    ranker = Ranker(warm=warm)
    choice, backend = _choose(op, 2, ranker)
    points = ranking(op)
    head = len({points.default, points[0]})
    assert head <= choice.measured <= head + 2 + (COLD if warm else 0)
    assert ranker.samples >= 1  # the best estimate, at least, taught it
    for knobs in {points.default, points[0]}:
        cycles = backend.run(compile_op(op, knobs).built.program, None).stats.cycles
        assert choice.stats.cycles <= cycles
    assert choice.default_cycles == backend.run(compile_op(op).built.program, None).stats.cycles


def test_choose_without_a_ranker_measures_by_the_estimate():
    op = Dense(DenseSpec(1, 64, 40, EP), AcceleratorTarget(PRESETS["tiny"]))
    choice, backend = _choose(op, 3, None)
    points = ranking(op)
    head = len({points.default, points[0]})
    assert choice.measured == min(head + 3, len(points))
    measured = [points.default, *[p for p in points if p != points.default][: choice.measured - 1]]
    best = min(backend.run(compile_op(op, k).built.program, None).stats.cycles for k in measured)
    assert choice.stats.cycles == best
