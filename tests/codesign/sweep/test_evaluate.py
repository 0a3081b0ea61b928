"""The sweep's evaluation of a hardware point: per-layer cycles are those of the layer's Program
on the timing model, chosen schedules are never slower than the defaults, a batch-1 model
offloads on a batch-2 core under both policies, host steps say why, bad options are refused; a
point's result does not depend on the points evaluated before it (the ranker's prior is learned
once, on the calibration configs)."""

from __future__ import annotations

import dataclasses

import pytest

from codesign.sweep.evaluate import Evaluator
from codesign.sweep.operators import make_operator, padded
from codesign.sweep.records import WorkloadSpec
from compiler.errors import ScheduleError
from compiler.ops.accel import compile_op, knobs_from_json
from compiler.target.accel import AcceleratorTarget
from hw.config import PRESETS
from hw.errors import InputError
from sim.backends import make_backend

WORKLOADS = [WorkloadSpec("mlp", "mlp"), WorkloadSpec("digits", "digits", weight=0.5)]


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(WORKLOADS, block_ins=(4, 8))


@pytest.fixture(scope="module")
def raised() -> Evaluator:
    return Evaluator(WORKLOADS[:1], batch_policy="raise", block_ins=(8,))


def _ops(evaluator: Evaluator, cfg, index: int):
    """(layer name, operator at the run's batch) of workload `index`'s accelerator steps."""
    steps = evaluator.workloads[index].steps_for(cfg.block_in)
    target = AcceleratorTarget(cfg)
    own = evaluator.workloads[index].batch
    return {s.name: make_operator(padded(s.spec, own, cfg.batch), target)
            for s in steps if s.spec is not None}


@pytest.mark.parametrize("preset", ["tiny", "rect"])
def test_layer_cycles_are_the_programs_on_the_timing_model(evaluator, preset):
    cfg = PRESETS[preset]
    results, wall = evaluator(cfg)
    backend = make_backend("timing", cfg)
    assert {"compile", "timing", "search", "total"} <= set(wall)
    for index, result in enumerate(results):
        ops = _ops(evaluator, cfg, index)
        accel = [x for x in result.layers if x.placement == "accel"]
        assert accel, f"{result.name} runs nothing on {preset}"
        for layer in accel:
            op = ops[layer.name]
            program = compile_op(op, knobs_from_json(op, layer.knobs)).built.program
            stats = backend.run(program, None).stats
            assert layer.cycles == stats.cycles
            assert layer.stats == stats.to_dict()
            assert layer.fidelity == "timing"
            default = backend.run(compile_op(op).built.program, None).stats
            assert layer.cycles <= default.cycles
        assert result.cycles == sum(x.cycles * x.count for x in accel)
        assert result.stats["gemm_uops"] == sum(x.stats["gemm_uops"] * x.count for x in accel)


def test_batch_one_model_offloads_on_a_batch_two_core(evaluator, raised):
    cfg = PRESETS["rect"]
    assert cfg.batch == 2
    (padded, _), _ = evaluator(cfg)
    (bigger,), _ = raised(cfg)
    assert padded.batch == 1 and bigger.batch == 2
    assert padded.offloaded_macs_fraction > 0
    assert bigger.offloaded_macs_fraction == padded.offloaded_macs_fraction
    assert bigger.cycles == padded.cycles  # one run of two inferences, the padded run's cycles


def test_identical_shapes_are_compiled_once(evaluator):
    results, _ = evaluator(PRESETS["tiny"])
    for result in results:
        steps = evaluator.workloads[[w.spec.name for w in evaluator.workloads].index(result.name)]
        accel_steps = [s for s in steps.steps_for(4) if s.spec is not None]
        counted = sum(x.count for x in result.layers if x.placement == "accel")
        specs = {s.spec for s in accel_steps}
        assert len([x for x in result.layers if x.placement == "accel"]) <= len(specs)
        assert counted <= len(accel_steps)


def test_host_steps_say_why(evaluator):
    results, _ = evaluator(PRESETS["tiny"])
    for result in results:
        host = [x for x in result.layers if x.placement == "host"]
        assert host
        assert all(x.reason for x in host)
    digits = results[1]
    shallow = [x for x in digits.layers if x.reason and "shallow convolution" in x.reason]
    assert shallow, "digits' one-channel first convolution stays on the host on block_in 4"


def test_energy_objective_uses_energy_of():
    calls = []

    def energy(stats, cfg):
        calls.append(cfg.name)
        return float(stats.inp_load_bytes + stats.wgt_load_bytes)

    ev = Evaluator(WORKLOADS[:1], layer_objective="energy", energy_of=energy, block_ins=(4,))
    (result,), _ = ev(PRESETS["tiny"])
    assert calls and set(calls) == {"tiny"}
    assert result.offloaded_macs_fraction > 0


@pytest.mark.parametrize("kwargs, message", [
    ({"layer_objective": "latency"}, "layer_objective must be one of cycles, energy, edp, not 'latency'"),
    ({"batch_policy": "drop"}, "batch_policy must be one of pad, raise, not 'drop'"),
    ({"layer_objective": "energy"}, "layer_objective 'energy' needs energy_of"),
    ({"layer_objective": "edp"}, "layer_objective 'edp' needs energy_of"),
    ({"measured": -1}, "measured must be at least 0, not -1"),
])
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        Evaluator([], **kwargs)


def test_a_layer_whose_default_schedule_fails_falls_back_to_another():
    """On a micro-op buffer of 32 entries the default schedule of digits' second convolution
    overflows it (the runtime would leave the layer on the host); the evaluator runs it with the
    next schedule of the space that compiles."""
    cfg = dataclasses.replace(PRESETS["tiny"], inp_bytes=128, acc_bytes=1024, wgt_bytes=1024, uop_bytes=128)
    ev = Evaluator(WORKLOADS[1:], block_ins=(4,))
    ops = _ops(ev, cfg, 0)
    with pytest.raises(ScheduleError, match="micro-op kernels need more than 32 entries"):
        compile_op(ops["relu2"])
    (result,), _ = ev(cfg)
    (layer,) = [x for x in result.layers if x.name == "relu2"]
    assert layer.placement == "accel" and layer.cycles


def test_a_layer_nothing_fits_says_so():
    cfg = dataclasses.replace(PRESETS["tiny"], acc_bytes=256)
    ev = Evaluator(WORKLOADS[1:], block_ins=(4,))
    (result,), _ = ev(cfg)
    (layer,) = [x for x in result.layers if x.name == "relu2"]
    assert layer.placement == "host"
    assert layer.reason == "no schedule of its space compiles for this core (conv2d)"


def test_a_sequence_model_counts_one_inference_per_run():
    """bert-tiny's dense layers have 128 rows per inference: its batch is its input's (1), not
    its rows', and the pooler's one row is not run as 128."""
    bert = Evaluator([WorkloadSpec("bert", "bert-tiny")], block_ins=(16,))
    (result,), _ = bert(PRESETS["vta"])
    assert result.batch == 1
    own = {s.name: s.spec for s in bert.workloads[0].steps_for(16) if s.spec is not None}
    assert {own[x.name].m for x in result.layers if x.placement == "accel"} >= {1, 128}


# block_in x block_out variants of `tiny`: mlp's layers rank differently on each
VARIANTS = [dataclasses.replace(PRESETS["tiny"], block_in=i, block_out=o) for i, o in
            [(4, 4), (8, 16), (16, 8), (16, 16)]]


def _results(ev: Evaluator, order: list[int]) -> dict[int, list[dict]]:
    return {i: [w.to_json() for w in ev(VARIANTS[i])[0]] for i in order}


@pytest.mark.parametrize("calibration", [(), (PRESETS["tiny"], VARIANTS[1])])
def test_a_points_result_does_not_depend_on_the_points_evaluated_before_it(calibration):
    """Evaluated in two orders by two evaluators, every point gets the same layers, schedules and
    cycles; evaluating leaves the prior as calibration made it.  (With one ranker learning across
    points, as before, 2 of these 4 points differed between the two orders.)"""
    first = Evaluator(WORKLOADS[:1], block_ins=(4, 8, 16), calibration=calibration)
    samples = first.prior.samples
    assert first.calibration_points == len(calibration) and (samples > 0) == bool(calibration)
    forward = _results(first, [0, 1, 2, 3])
    assert first.prior.samples == samples
    backward = _results(Evaluator(WORKLOADS[:1], block_ins=(4, 8, 16), calibration=calibration), [3, 2, 1, 0])
    assert forward == backward


def test_calibration_learns_from_every_config_and_is_not_counted_as_points(monkeypatch):
    seen = []
    monkeypatch.setattr(Evaluator, "_evaluate", lambda self, cfg, ranker: seen.append((cfg, ranker)))
    ev = Evaluator(WORKLOADS[:1], block_ins=(4, 8, 16), calibration=VARIANTS)
    assert ev.calibration_points == 4 and ev.calibration_s >= 0
    assert [cfg for cfg, _ in seen] == VARIANTS and all(ranker is ev.prior for _, ranker in seen)
    assert ev.measured_total == ev.chosen_total == 0
