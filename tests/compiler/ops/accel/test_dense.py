"""dense against numpy, exactly, including ResNet-18's 512->1000 classifier."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops.accel import Dense, DenseSpec, Epilogue
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from tests.compiler.conftest import CONFIGS, check_op


def test_resnet18_classifier_exact():
    op = Dense(DenseSpec(1, 512, 1000), AcceleratorTarget(PRESETS["vta"]))
    result = check_op(op)
    assert result.stats.gemm_uops == 32 * 63


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CONFIGS), st.integers(1, 4), st.integers(1, 70), st.integers(1, 70),
       st.integers(0, 10**6), st.booleans())
def test_generated_shapes_and_points_exact(cfg, m_blocks, k, n, pick, relu):
    t = AcceleratorTarget(cfg)
    scaled, precise = pick % 4 in (1, 2), pick % 4 == 2
    ep = Epilogue(clip=(0, 127) if relu else None, channel_multiplier=scaled, round=scaled,
                  shift=31 if precise else 8, split=12 if precise else 0)
    op = Dense(DenseSpec(m_blocks * t.batch, k, n, ep), t)
    points = [p for p in op.points() if op.fits(p)]
    knobs = op.default_knobs() if pick % 3 == 0 else points[pick % len(points)]
    check_op(op, knobs=knobs, seed=pick, fsim_seed=pick if pick % 2 else None)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(CONFIGS), st.integers(1, 4), st.integers(1, 600), st.integers(1, 1100))
def test_estimates_equal_the_scalar_estimate(cfg, m_blocks, k, n):
    op = Dense(DenseSpec(m_blocks * cfg.batch, k, n, Epilogue(channel_multiplier=True, round=True)),
               AcceleratorTarget(cfg))
    _, costs = op.estimates()
    assert [None if x != x else float(x) for x in costs] == [op.estimate(q) for q in op.points()]
