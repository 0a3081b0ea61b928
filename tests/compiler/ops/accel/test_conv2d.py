"""conv2d against numpy, exactly: ResNet-18's shapes, generated shapes and schedule points."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dKnobs, Conv2dSpec, Epilogue
from compiler.ops.accel.resnet18 import CONVS as RESNET18
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from tests.compiler.conftest import CONFIGS, check_op


@pytest.mark.parametrize("layer", RESNET18, ids=[r[0] for r in RESNET18])
def test_resnet18_layers_exact_on_fsim(layer):
    op = Conv2d(Conv2dSpec(*layer[1:]), AcceleratorTarget(PRESETS["vta"]))
    result = check_op(op)
    assert result.stats.gemm_uops == -(-layer[2] // 16) * 16 * op.spec.macs // layer[2] // 256


@st.composite
def conv_cases(draw):  # type: ignore[no-untyped-def]
    cfg = draw(st.sampled_from(CONFIGS))
    t = AcceleratorTarget(cfg)
    kernel = draw(st.sampled_from([1, 2, 3, 5]))
    stride = draw(st.sampled_from([1, 2]))
    pad = draw(st.integers(0, kernel // 2))
    h = draw(st.integers(max(kernel - 2 * pad, 1), 12))
    w = draw(st.integers(max(kernel - 2 * pad, 1), 12))
    c = draw(st.integers(1, 3 * t.block_in))
    k = draw(st.integers(1, 3 * t.block_out))
    ep = draw(st.sampled_from([Epilogue(), Epilogue(bias=False, shift=0, clip=None),
                               Epilogue(multiplier=3, shift=6, round=True, clip=(-100, 100)),
                               Epilogue(channel_multiplier=True, shift=14, round=True,
                                        clip=(-128, 127)),
                               Epilogue(channel_multiplier=True, shift=22, round=True),
                               Epilogue(channel_multiplier=True, shift=17, scaled_bias=True),
                               Epilogue(channel_multiplier=True, shift=17, scaled_bias=True,
                                        residual=-3000, clip=(0, 127)),
                               Epilogue(channel_multiplier=True, shift=24, scaled_bias=True,
                                        residual=90000),
                               Epilogue(residual=1, shift=4),
                               Epilogue(channel_multiplier=True, round=True, shift=31, split=13, clip=None),
                               Epilogue(channel_multiplier=True, round=True, shift=12, split=4,
                                        clip=(0, 127))]))
    spec = Conv2dSpec(t.batch * draw(st.integers(1, 2)), c, h, w, k, kernel, stride, pad, ep)
    return Conv2d(spec, t), draw(st.integers(0, 2**16)), draw(st.integers(0, 10**6))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_generated_shapes_and_schedule_points_exact(case):
    op, seed, pick = case
    points = [p for p in op.points() if op.fits(p)]
    knobs = op.default_knobs() if pick % 3 == 0 else points[pick % len(points)]
    check_op(op, knobs=knobs, seed=seed, fsim_seed=seed if pick % 2 else None)


@pytest.mark.parametrize("threads", [(1, 1), (2, 1), (1, 2), (4, 1), (2, 2)])
def test_virtual_thread_counts(threads):
    t = AcceleratorTarget(PRESETS["rect"])
    op = Conv2d(Conv2dSpec(2, 16, 8, 8, 64, 3, 1, 1), t)
    knobs = Conv2dKnobs(tile_h=2, tile_w=8, tile_oc=1, tile_ic=1, oc_threads=threads[0],
                        h_threads=threads[1])
    for seed in range(3):  # random legal interleavings expose a missing token
        check_op(op, knobs=knobs, fsim_seed=seed)


def test_default_schedule_follows_the_config():
    spec = Conv2dSpec(1, 64, 56, 56, 64, 3, 1, 1)
    small = PRESETS["vta"].with_params(inp_bytes=8192, acc_bytes=16384)
    a = Conv2d(spec, AcceleratorTarget(PRESETS["vta"])).default_knobs()
    b = Conv2d(spec, AcceleratorTarget(small)).default_knobs()
    assert a != b
    assert Conv2d(spec, AcceleratorTarget(small)).fits(b)


def test_every_point_compiles_or_raises_schedule_error():
    op = Conv2d(Conv2dSpec(1, 8, 6, 6, 8, 3, 1, 1), AcceleratorTarget(PRESETS["tiny"]))
    compiled = failed = 0
    for knobs in op.points()[::7]:
        try:
            check_op(op, knobs=knobs)
            compiled += 1
        except ScheduleError:
            failed += 1
            assert not op.fits(knobs)  # only points the space marks as not fitting fail
    assert compiled > 5 and failed > 0


def test_products_whose_inputs_and_weights_stack_differently_replay_exactly():
    """Regression: this schedule's GEMMs stack four products whose inputs form one lattice over
    the four and whose weights a 2x2 grid (sim.product._aligned); fsim's replay of its first run
    equals the step-by-step run and the reference."""
    import numpy as np

    from compiler.ops.accel import compile_op
    from sim.fsim import FunctionalSimulator

    op = Conv2d(Conv2dSpec(1, 8, 6, 6, 8, 3, 1, 1), AcceleratorTarget(PRESETS["tiny"]))
    knobs = Conv2dKnobs(tile_b=1, tile_h=3, tile_w=2, tile_oc=2, tile_ic=1, oc_threads=1, h_threads=2)
    program = compile_op(op, knobs).built.program
    sim = FunctionalSimulator(op.target.cfg)
    for seed in range(2):  # recorded and replayed, then replayed
        inputs = op.random_inputs(seed)
        got = sim.run(program, inputs)
        want = FunctionalSimulator(op.target.cfg, replay=False).run(program, inputs)
        assert np.array_equal(got.dram, want.dram) and got.stats == want.stats
        assert np.array_equal(got.outputs["out"], op.reference(inputs))


def test_bad_specs_are_rejected():
    with pytest.raises(ValueError, match="conv2d stride must be positive"):
        Conv2dSpec(1, 16, 8, 8, 16, 3, 0)
    with pytest.raises(ValueError, match="larger than the padded input"):
        Conv2dSpec(1, 16, 2, 2, 16, 5, 1, 0)
    with pytest.raises(ScheduleError, match="not a multiple of the core's batch 2"):
        Conv2d(Conv2dSpec(3, 16, 8, 8, 16, 3), AcceleratorTarget(PRESETS["rect"]))
    op = Conv2d(Conv2dSpec(1, 16, 8, 8, 16, 3), AcceleratorTarget(PRESETS["tiny"]))
    with pytest.raises(ScheduleError, match="knob tile_h=4 is not one of"):
        op.schedule(Conv2dKnobs(tile_h=4))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(CONFIGS), st.sampled_from(RESNET18[1:]), st.sampled_from([None, 1, 2]),
       st.integers(0, 3))
def test_estimates_equal_the_scalar_estimate(cfg, layer, residual, small):
    """The vectorised estimates are the scalar estimate's exact floats (so the default is too),
    on scratchpads shrunk as far as a quarter."""
    _, n, c, h, w, k, r, s, p = layer
    cfg = cfg.with_params(inp_bytes=max(cfg.inp_bytes >> small, cfg.inp_elem_bytes),
                          acc_bytes=max(cfg.acc_bytes >> small, cfg.acc_elem_bytes))
    ep = Epilogue(channel_multiplier=True, scaled_bias=True, residual=residual)
    op = Conv2d(Conv2dSpec(n * cfg.batch, c, h, w, k, r, s, p, ep), AcceleratorTarget(cfg))
    grid, costs = op.estimates()
    points = op.points()
    assert [int(grid["tile_h"][i]) for i in range(len(points))] == [q.tile_h for q in points]
    scalar = [op.estimate(q) for q in points]
    assert [None if x != x else float(x) for x in costs] == scalar
