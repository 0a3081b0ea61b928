import shutil

import numpy as np
import pytest

from codesign.tune.measure import Measurer, measure, task_for
from codesign.tune.tuner import tune
from compiler.ops.accel import compile_op
from sim.backends import make_backend

from .conftest import TINY


def _tuned(problem, store):
    space, _ = problem
    result = tune(space, TINY, Measurer(store=store, workers=0), trials=24, seed=2)
    return space, result


def test_a_trial_records_cycles_stats_times_and_the_schedule(problem):
    space, cycles = problem
    res = measure(task_for(space.workload, TINY, space.points[0]))
    assert res.status == "ok" and res.cycles == cycles[0] == res.stats["cycles"]
    assert res.compile_s > 0 and res.run_s > 0 and res.instructions > 0
    assert res.schedule["knobs"] == space.points[0].to_json() and res.schedule["records"]


def test_a_schedule_error_is_a_result():
    from compiler.ops.accel import Dense, DenseSpec
    from compiler.target import AcceleratorTarget
    from compiler.tune.workload import Workload

    op = Dense(DenseSpec(4, 32, 24), AcceleratorTarget(TINY))
    res = measure(task_for(Workload.of(op), TINY, {"tile_m": 3, "tile_k": 1, "tile_n": 1,
                                                    "n_threads": 1, "m_threads": 1}))
    assert res.status == "schedule_error" and "tile_m=3 is not one of" in res.error


def test_tuned_schedule_is_exact_on_fsim(problem, store):
    space, result = _tuned(problem, store)
    op = space.op
    compiled = compile_op(op, knobs=result.best_knobs)
    inputs = op.random_inputs(5)
    out = make_backend("fsim", TINY).run(compiled.built.program, inputs).outputs["out"]
    assert np.array_equal(out, op.reference(inputs))


@pytest.mark.rtl
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not installed")
def test_tuned_schedule_is_exact_on_rtl_with_the_timing_models_cycles(problem, store):
    space, result = _tuned(problem, store)
    res = measure(task_for(space.workload, TINY, result.best_knobs, backend="rtl"))
    assert res.status == "ok" and res.correct is True
    assert res.cycles == result.best_cycles  # the timing model is cycle-exact with rtl
