"""The sweep's program cache: a stream compiled on one config gives compile_op's Program, byte for
byte, on every config of its compile key (other scratchpad depths, micro-op buffers and memory
systems), or the ScheduleError compile_op raises there; its timing Stats are a fresh run's."""

from __future__ import annotations

import contextlib
import dataclasses
import random

import pytest

from codesign.sweep.programs import ProgramCache, compile_key, timing_key, uop_limit
from codesign.sweep.schedules import ranking
from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec, Epilogue, compile_op
from compiler.target.accel import AcceleratorTarget
from hw.config import PRESETS
from sim.backends import make_backend

from .test_schedules import _program as _outcome
from .test_schedules import _same

EP = Epilogue(channel_multiplier=True, scaled_bias=True)
BASE = PRESETS["tiny"]
# one compile key: micro-op buffers whose fold limits are 16, 32 and 128, other depths and buses
CONFIGS = [
    BASE,
    dataclasses.replace(BASE, uop_bytes=128, inp_bytes=4096, acc_bytes=16384, bus_bits=128, mem_inflight=8),
    dataclasses.replace(BASE, uop_bytes=4096, wgt_bytes=8192, acc_bytes=2048),
    dataclasses.replace(BASE, uop_bytes=256, inp_bytes=512, wgt_bytes=512),
]
OPS = [
    lambda t: Conv2d(Conv2dSpec(1, 16, 8, 8, 32, 3, 1, 1, EP), t),
    lambda t: Dense(DenseSpec(1, 64, 40, EP), t),
]




def _knobs(make, count: int, seed: int) -> list:
    """Points of the op's space on the largest config: its best-estimated and random ones."""
    op = make(AcceleratorTarget(CONFIGS[2]))
    points = ranking(op)
    rng = random.Random(seed)
    return [*points[:6], *rng.sample(list(points), min(count, len(points)))]


@pytest.mark.parametrize("make", OPS)
def test_cached_programs_equal_compile_ops_across_the_compile_key(make):
    assert len({compile_key(c) for c in CONFIGS}) == 1
    assert len({uop_limit(AcceleratorTarget(c)) for c in CONFIGS}) == 3
    cache = ProgramCache()
    outcomes = set()
    for knobs in _knobs(make, 24, 0):
        for cfg in CONFIGS:
            op = make(AcceleratorTarget(cfg))
            got = _outcome(cache.program, op, knobs)
            assert _same(got, _outcome(lambda o, k: compile_op(o, k).built.program, op, knobs)), (cfg, knobs)
            outcomes.add(isinstance(got, str))
    assert cache.hits > 0 and cache.misses > 0
    assert outcomes == {True, False}  # both Programs and refusals were compared


def test_a_stream_split_by_the_micro_op_limit_is_kept_for_that_limit_only():
    cache = ProgramCache()
    for knobs in _knobs(OPS[0], 40, 1):
        for cfg in CONFIGS:
            with contextlib.suppress(ScheduleError):
                cache.stream(OPS[0](AcceleratorTarget(cfg)), knobs)
    streams = [s for group in cache._streams.values() for s in group]
    split = [s for s in streams if s.split]
    assert split and all(not s.holds_for(s.limit * 2) and s.holds_for(s.limit) for s in split)
    whole = [s for s in streams if not s.split]
    assert whole and all(s.holds_for(s.kernel_uops) and not s.holds_for(s.kernel_uops - 1)
                         for s in whole if s.kernel_uops > 16)


def test_capacity_is_rechecked_on_a_smaller_scratchpad():
    big, small = CONFIGS[2], dataclasses.replace(CONFIGS[2], inp_bytes=64)
    op_big, op_small = (OPS[0](AcceleratorTarget(c)) for c in (big, small))
    knobs = ranking(op_big)[0]
    cache = ProgramCache()
    cache.stream(op_big, knobs)
    with pytest.raises(ScheduleError, match=r"^buffers in scope inp need \d+ elements \(.*\), more than "
                                            r"the 16 the inp scratchpad holds$") as cached:
        cache.stream(op_small, knobs)
    with pytest.raises(ScheduleError) as fresh:
        compile_op(op_small, knobs)
    assert str(cached.value) == str(fresh.value) and cache.hits == 1


def test_timing_stats_are_reused_for_one_memory_system_only():
    cache = ProgramCache()
    same_memory = [CONFIGS[0], dataclasses.replace(CONFIGS[0], inp_bytes=4096, wgt_bytes=8192)]
    other_memory = dataclasses.replace(CONFIGS[0], bus_bits=128)
    points = ranking(OPS[0](AcceleratorTarget(CONFIGS[0])))[:3]  # they fit all three
    for cfg in [*same_memory, other_memory]:
        op = OPS[0](AcceleratorTarget(cfg))
        backend = make_backend("timing", cfg)
        for knobs in points:
            fresh = backend.run(compile_op(op, knobs).built.program, None).stats
            assert cache.stats(op, knobs, backend) == fresh
    assert cache.runs == 6 and cache.reruns == 3


def test_only_the_timing_model_is_memoised():
    assert timing_key(make_backend("fsim", BASE)) is None
    assert timing_key(make_backend("timing", BASE)) != timing_key(
        make_backend("timing", dataclasses.replace(BASE, mem_inflight=8)))
