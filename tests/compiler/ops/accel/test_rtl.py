"""Compiled operators on the RTL, exact, and ResNet-18's layers with their cycle counts."""

from __future__ import annotations

import pytest

from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dKnobs, Conv2dSpec, Dense, DenseSpec, Epilogue, compile_op
from compiler.ops.accel.resnet18 import CONVS as RESNET18
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from tests.compiler.conftest import CONFIGS, check_op

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def rtl():  # type: ignore[no-untyped-def]
    from sim.rtl.backend import RtlSimulator

    sims: dict[str, RtlSimulator] = {}
    return lambda cfg: sims.setdefault(cfg.name, RtlSimulator(cfg))


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c.name for c in CONFIGS])
def test_conv_and_dense_points_on_rtl(cfg, rtl):
    t = AcceleratorTarget(cfg)
    conv = Conv2d(Conv2dSpec(t.batch, 2 * t.block_in, 6, 6, 2 * t.block_out, 3, 1, 1,
                             Epilogue(multiplier=3, round=True, shift=5, clip=(-90, 90))), t)
    four_threads = Conv2dKnobs(tile_h=1, tile_w=6, tile_ic=2, oc_threads=2, h_threads=2)
    points = [conv.default_knobs(), Conv2dKnobs(tile_h=3, tile_w=6, oc_threads=2)]
    if t.token_capacity >= 4:
        points.append(four_threads)
    else:  # 2-bit token counters hold 3 outstanding tokens: four threads could deadlock
        assert not conv.fits(four_threads)
        with pytest.raises(ScheduleError, match=r"= 4 threads can leave 4 tokens outstanding on one "
                                                r"queue; the token counters hold 3 \(token_counter_bits=2\)"):
            compile_op(conv, knobs=four_threads)
    for knobs in points:
        result = check_op(conv, backend=rtl(cfg), knobs=knobs)
        assert result.stats.cycles and result.stats.gemm_uops == 2 * 2 * 36 * 9
    for ep in (Epilogue(), Epilogue(channel_multiplier=True, round=True, shift=12, clip=(-100, 120)),
               Epilogue(channel_multiplier=True, round=True, shift=20),
               Epilogue(channel_multiplier=True, shift=20, scaled_bias=True),
               Epilogue(channel_multiplier=True, round=True, shift=31, split=12, clip=None)):
        check_op(Dense(DenseSpec(2 * t.batch, 3 * t.block_in, 5 * t.block_out, ep), t), backend=rtl(cfg))
    residual = Epilogue(channel_multiplier=True, shift=20, scaled_bias=True, residual=-70000, clip=(0, 127))
    fused = Conv2d(Conv2dSpec(t.batch, t.block_in, 6, 6, 2 * t.block_out, 3, 1, 1, residual), t)
    check_op(fused, backend=rtl(cfg), knobs=Conv2dKnobs(tile_h=3, tile_w=6, oc_threads=2))
    precise = Epilogue(channel_multiplier=True, round=True, shift=31, split=13, clip=(0, 127))
    conv = Conv2d(Conv2dSpec(t.batch, t.block_in, 6, 6, 2 * t.block_out, 3, 1, 1, precise), t)
    check_op(conv, backend=rtl(cfg), knobs=Conv2dKnobs(tile_h=3, tile_w=6, oc_threads=2))


@pytest.mark.parametrize("layer", RESNET18, ids=[r[0] for r in RESNET18])
def test_resnet18_layers_exact_on_rtl(layer, rtl):
    cfg = PRESETS["vta"]
    op = Conv2d(Conv2dSpec(*layer[1:]), AcceleratorTarget(cfg))
    result = check_op(op, backend=rtl(cfg))
    assert result.stats.cycles >= result.stats.gemm_uops


def test_resnet18_classifier_exact_on_rtl(rtl):
    cfg = PRESETS["vta"]
    check_op(Dense(DenseSpec(1, 512, 1000), AcceleratorTarget(cfg)), backend=rtl(cfg))


@pytest.mark.parametrize("name", ["layer3", "layer4_skip"])
def test_timing_model_predicts_compiled_layers(name, rtl):
    from compiler.ops.accel.resnet18 import BENCH_EPILOGUE, conv_specs
    from sim.backends import make_backend

    cfg = PRESETS["vta"]
    spec = dict(conv_specs(BENCH_EPILOGUE))[name]
    op = Conv2d(spec, AcceleratorTarget(cfg))
    program = compile_op(op).built.program
    inputs = op.random_inputs(0)
    measured = rtl(cfg).run(program, inputs).stats
    predicted = make_backend("timing", cfg).run(program, inputs).stats
    assert predicted.functional() == measured.functional()
    assert abs(predicted.cycles - measured.cycles) <= 0.03 * measured.cycles
