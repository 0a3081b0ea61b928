import json

import pytest

from codesign.sweep.confirm import Confirmation, confirm
from codesign.sweep.evaluate import Evaluator
from codesign.sweep.records import WorkloadSpec
from hw.config import preset
from sim.backends import make_backend
from tests.codesign.sweep.test_prepare import folded_model
from tests.sim.rtl.stub_accel import needs_verilator


@pytest.fixture(scope="module")
def evaluator():
    return Evaluator([WorkloadSpec("digits", "digits")], measured=1)


@pytest.mark.rtl
@needs_verilator[1]
def test_a_swept_design_is_exact_on_fsim_and_rtl_with_the_timing_models_cycles(evaluator):
    cfg = preset("tiny")
    results, _ = evaluator(cfg)
    from codesign.sweep.records import PointResult

    swept = PointResult("p", tuple(results), {}, {})
    (c,) = confirm(cfg, "p", evaluator.workloads, evaluator.objective(cfg), swept, measured=1)
    assert c.fsim_exact and c.rtl_exact
    assert c.accel_steps > 0 and c.rtl_cycles == c.timing_cycles > 0 and c.mismatched_steps == ()
    # the confirmed model is the one the sweep measured: the same schedules, the same cycles
    assert c.swept_cycles == results[0].cycles == c.timing_cycles
    assert c.ok
    assert Confirmation.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_a_confirmation_that_differs_anywhere_is_not_ok():
    base = Confirmation("p", "w", True, True, 100, 100, 100, (), 3, 1.0)
    assert base.ok
    for changed in ({"fsim_exact": False}, {"rtl_exact": False}, {"rtl_cycles": 101},
                    {"mismatched_steps": ("conv1",)}, {"swept_cycles": 99}, {"reason": "no batch"}):
        assert not Confirmation(**{**base.__dict__, **changed}).ok
    assert Confirmation(**{**base.__dict__, "swept_cycles": None}).ok


@pytest.fixture(scope="module")
def on_rect():
    """A batch-1 mlp and digits swept on `rect`, whose core has batch 2: run at batch 2."""
    cfg = preset("rect")
    evaluator = Evaluator([WorkloadSpec("mlp", "mlp"), WorkloadSpec("digits", "digits")], measured=1,
                          block_ins=(8,))
    results, _ = evaluator(cfg)
    from codesign.sweep.records import PointResult

    return cfg, evaluator, PointResult("p", tuple(results), {}, {})


def _timing_for_rtl(kind, cfg):
    return make_backend("timing" if kind == "rtl" else kind, cfg)


def test_a_padded_design_runs_its_models_at_the_padded_batch_with_the_swept_cycles(on_rect):
    cfg, evaluator, swept = on_rect
    assert [w.batch for w in swept.workloads] == [1, 1] and cfg.batch == 2
    found = confirm(cfg, "p", evaluator.workloads, evaluator.objective(cfg), swept, measured=1,
                    backends=_timing_for_rtl)
    for c, w in zip(found, swept.workloads, strict=True):
        assert c.reason is None and c.batch == 2 and c.fsim_exact and c.accel_steps > 0
        assert c.swept_cycles == w.cycles == c.timing_cycles > 0


@pytest.mark.rtl
@needs_verilator[1]
def test_a_padded_design_is_exact_on_fsim_and_rtl_with_the_swept_cycles(on_rect):
    cfg, evaluator, swept = on_rect
    found = confirm(cfg, "p", evaluator.workloads, evaluator.objective(cfg), swept, measured=1)
    assert [c.workload for c in found] == ["mlp", "digits"]
    for c, w in zip(found, swept.workloads, strict=True):
        assert c.batch == 2 and c.fsim_exact and c.rtl_exact and c.mismatched_steps == ()
        assert c.rtl_cycles == c.timing_cycles == c.swept_cycles == w.cycles > 0
        assert c.ok


def test_a_model_that_cannot_run_at_the_core_s_batch_is_recorded_with_the_reason(tmp_path):
    cfg = preset("rect")
    evaluator = Evaluator([WorkloadSpec("folded", folded_model(tmp_path / "folded.onnx"))], measured=1,
                          block_ins=(8,))
    (c,) = confirm(cfg, "p", evaluator.workloads, evaluator.objective(cfg), None, measured=1)
    assert c.batch == 2 and not c.ok
    assert c.reason is not None and c.reason.startswith("cannot run at the core's batch 2: ")
    assert "cannot re-batch from 1 to 2: output 'y'" in c.reason
    assert Confirmation.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_a_confirmation_stored_before_batches_reads_back_at_batch_1():
    row = Confirmation("p", "w", True, True, 100, 100, 100, (), 3, 1.0).to_json()
    old = {k: v for k, v in row.items() if k not in ("batch", "reason")}
    want = Confirmation("p", "w", True, True, 100, 100, 100, (), 3, 1.0, batch=1, reason=None)
    assert Confirmation.from_json(old) == want
