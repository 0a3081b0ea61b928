"""The proxy: the compiler's best estimate per operator, its schedule's event counts as the timing
model counts them, summed over a workload's accelerator steps into latency and energy."""

from __future__ import annotations

import pytest

from codesign.ppa.energy import energy_model
from codesign.sweep.operators import is_shallow, make_operator
from codesign.sweep.prepare import prepare
from codesign.sweep.proxy import PROXY_METRICS, Proxy, _op_counts
from codesign.sweep.records import WorkloadSpec
from codesign.sweep.schedules import ProgramCache, ranking
from compiler.ops.accel import Conv2dSpec, DenseSpec, Epilogue
from compiler.target.accel import AcceleratorTarget
from hw.config import PRESETS
from sim.backends import make_backend

EP = Epilogue(channel_multiplier=True, scaled_bias=True)


@pytest.fixture(scope="module")
def mlp():
    return prepare(WorkloadSpec("mlp", "mlp"), (8,))


def _timed(spec, cfg):
    """The timing model's Stats of `spec`'s best-estimated schedule on `cfg`."""
    target = AcceleratorTarget(cfg)
    op = make_operator(spec, target)
    knobs = ranking(op)[0]
    cache = ProgramCache()
    stream = cache.stream(op, knobs)
    return cache.run(stream, cache.encode(stream, cfg), make_backend("timing", cfg))


@pytest.mark.parametrize("spec", [Conv2dSpec(1, 16, 8, 8, 32, 3, 1, 1, EP), DenseSpec(1, 64, 40, EP)])
def test_the_counts_of_the_best_estimated_schedule_are_the_timing_models(spec):
    cfg = PRESETS["tiny"]
    counts = _op_counts(spec, AcceleratorTarget(cfg))
    timed = _timed(spec, cfg)
    assert counts is not None
    for name in ("gemm_uops", "alu_uops", "wgt_load_bytes", "out_store_bytes"):
        assert round(getattr(counts, name)) == getattr(timed, name), name
    # The DMA moves no padding; the estimate counts the padded input tile (at most the padded
    # image's share more).
    padded = 1.0
    if isinstance(spec, Conv2dSpec):
        padded = (spec.height + 2 * spec.pad) * (spec.width + 2 * spec.pad) / (spec.height * spec.width)
    assert timed.inp_load_bytes <= counts.inp_load_bytes <= padded * timed.inp_load_bytes
    assert 0.5 < counts.cycles / timed.cycles < 2


def test_a_workloads_latency_is_its_accelerator_steps_best_estimates(mlp):
    cfg = PRESETS["tiny"]
    target = AcceleratorTarget(cfg)
    steps = [s for s in mlp.steps_for(target.block_in) if s.spec is not None and not is_shallow(s, target)]
    assert steps
    expected = sum(ranking(make_operator(s.spec, target)).estimate(0) for s in steps)
    got = Proxy([mlp])(cfg)
    assert set(got) == set(PROXY_METRICS)
    assert got["latency_cycles"] == pytest.approx(expected)
    assert got["latency_ms"] == pytest.approx(expected / (cfg.clock_mhz * 1e3))
    total, per_run = Proxy([mlp]).counts(mlp, target)
    assert per_run == 1
    assert got["energy_uj"] == pytest.approx(energy_model(total.stats(), cfg).total_pj * 1e-6)
    assert got["edp"] == pytest.approx(got["energy_uj"] * got["latency_ms"])


def test_a_padded_batch_counts_per_run_and_a_raised_one_per_inference(mlp):
    cfg = PRESETS["rect"]
    assert cfg.batch == 2
    pad, raised = Proxy([mlp], "pad")(cfg), Proxy([mlp], "raise")(cfg)
    assert raised["latency_cycles"] == pytest.approx(pad["latency_cycles"] / 2)
    assert raised["energy_uj"] == pytest.approx(pad["energy_uj"] / 2)


def test_workloads_are_weighted_as_the_sweeps_metrics_weigh_them(mlp):
    from dataclasses import replace

    cfg = PRESETS["tiny"]
    heavy = replace(mlp, spec=replace(mlp.spec, weight=3.0))
    one = Proxy([mlp])(cfg)
    both = Proxy([heavy, mlp])(cfg)  # the same workload twice: the weighted mean is itself
    assert both["latency_cycles"] == pytest.approx(one["latency_cycles"])
    assert both["energy_uj"] == pytest.approx(one["energy_uj"])
