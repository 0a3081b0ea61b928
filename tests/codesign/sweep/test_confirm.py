import json

import pytest

from codesign.sweep.confirm import Confirmation, confirm
from codesign.sweep.evaluate import Evaluator
from codesign.sweep.records import WorkloadSpec
from hw.config import preset
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
                    {"mismatched_steps": ("conv1",)}, {"swept_cycles": 99}):
        assert not Confirmation(**{**base.__dict__, **changed}).ok
    assert Confirmation(**{**base.__dict__, "swept_cycles": None}).ok
