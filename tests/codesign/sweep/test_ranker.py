"""The ranker's features restate the compiler's estimate exactly, add the loads' burst latency
only where it bounds them and mark residual epilogues, and its ridge regression learns a
correction of the estimate from measured points."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.sweep.ranker import FEATURES, Ranker, features
from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec, Eltwise, EltwiseSpec, Epilogue
from compiler.target.accel import AcceleratorTarget
from hw.config import PRESETS

EP = Epilogue(channel_multiplier=True, scaled_bias=True)


@pytest.mark.parametrize("preset", ["tiny", "rect", "vta"])
@pytest.mark.parametrize("make", [
    lambda t: Conv2d(Conv2dSpec(2, 64, 14, 14, 64, 3, 1, 1, EP), t),
    lambda t: Conv2d(Conv2dSpec(2, 32, 16, 16, 64, 1, 2, 0, EP), t),
    lambda t: Dense(DenseSpec(2, 256, 40, EP), t),
])
def test_features_hold_the_estimate(make, preset):
    op = make(AcceleratorTarget(PRESETS[preset]))
    grid, costs = op.estimates()
    fitting = np.flatnonzero(~np.isnan(costs))
    x = features(op, grid, fitting)
    assert x is not None and x.shape == (len(fitting), FEATURES)
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose(np.exp(x[:, 1]), costs[fitting], rtol=1e-12)


def test_an_operator_without_features():
    op = Eltwise(EltwiseSpec("add", 1, 16, 4, 4, (0, 127), 1, 1, 0), AcceleratorTarget(PRESETS["tiny"]))
    assert features(op, {}, np.arange(0)) is None


BURSTS, RESIDUAL = 22, 24  # the columns of the bursts-bound estimate and the residual flag


def _features(spec, cfg):
    op = Conv2d(spec, AcceleratorTarget(cfg))
    grid, costs = op.estimates()
    x = features(op, grid, np.flatnonzero(~np.isnan(costs)))
    assert x is not None
    return x


def test_the_burst_latency_counts_only_where_it_bounds_the_loads():
    spec = Conv2dSpec(2, 32, 16, 16, 64, 1, 2, 0, EP)  # a strided 1x1 convolution: short input rows
    vta = PRESETS["vta"]
    quick = _features(spec, dataclasses.replace(vta, dram_latency_cycles=1, mem_inflight=16))
    assert np.all(quick[:, BURSTS] == 0) and np.all(quick[:, BURSTS + 1] == 0)
    slow = _features(spec, dataclasses.replace(vta, dram_latency_cycles=1024, mem_inflight=1))
    assert np.all(slow[:, BURSTS] > 0)
    many = slow[:, 12] == 0  # more than one thread
    np.testing.assert_array_equal(slow[:, BURSTS + 1], np.where(many, slow[:, BURSTS], 0))


@pytest.mark.parametrize("residual", [None, 0])
def test_a_residual_epilogue_is_a_feature(residual):
    ep = dataclasses.replace(EP, residual=residual)
    x = _features(Conv2dSpec(1, 32, 8, 8, 32, 3, 1, 1, ep), PRESETS["vta"])
    assert np.all(x[:, RESIDUAL] == (residual is not None))
    np.testing.assert_array_equal(x[:, RESIDUAL + 1], x[:, RESIDUAL] * x[:, 18])  # log(acc)


def test_the_ranker_learns_a_linear_correction():
    rng = np.random.default_rng(0)
    truth = rng.normal(0, 0.05, FEATURES)
    ranker = Ranker(ridge=1e-6, warm=50)
    assert not ranker.trained and np.all(ranker.correction(np.ones((3, FEATURES))) == 0)
    x = np.column_stack([np.ones(200), rng.normal(0, 1, (200, FEATURES - 1))])
    estimates = rng.uniform(1e4, 1e6, 200)
    for row, est in zip(x, estimates, strict=True):
        ranker.observe(row, est, round(est * np.exp(row @ truth)))
    assert ranker.trained and ranker.samples == 200
    probe = np.column_stack([np.ones(20), rng.normal(0, 1, (20, FEATURES - 1))])
    np.testing.assert_allclose(ranker.correction(probe), probe @ truth, atol=1e-3)


def test_a_copy_starts_from_what_the_ranker_learned_and_learns_alone():
    rng = np.random.default_rng(1)
    prior = Ranker(warm=3)
    for _ in range(3):
        prior.observe(rng.normal(0, 1, FEATURES), 1000.0, int(rng.integers(500, 2000)))
    probe = rng.normal(0, 1, (4, FEATURES))
    before = prior.correction(probe)
    copy = prior.copy()
    assert copy.trained and copy.samples == 3 and copy.ridge == prior.ridge and copy.warm == prior.warm
    np.testing.assert_array_equal(copy.correction(probe), before)
    copy.observe(rng.normal(0, 1, FEATURES), 1000.0, 4000)
    assert copy.samples == 4 and prior.samples == 3
    assert not np.array_equal(copy.correction(probe), before)
    np.testing.assert_array_equal(prior.correction(probe), before)
