import time

import numpy as np
import pytest

from codesign.tune import log
from codesign.tune.measure import Measurer, measure
from codesign.tune.records import TrialRecord
from codesign.tune.tuner import tune

from .conftest import TINY


def _replay(problem, store):
    return Measurer(store=store, workers=0)  # every point is in the store: no pool needed


@pytest.mark.parametrize("method", ["model", "random", "grid"])
def test_each_method_measures_distinct_points_up_to_the_budget(problem, store, method):
    space, cycles = problem
    result = tune(space, TINY, _replay(problem, store), trials=12, method=method, seed=1)
    assert len(result.order) == len(set(result.order)) == 12 == len(result.records)
    assert result.best_cycles == min(cycles[i] for i in result.order)
    assert all(r.cached and r.status == "ok" and r.method == method for r in result.records)


def test_the_model_finds_the_best_point_in_fewer_trials_than_random(problem, store):
    space, cycles = problem
    best = float(cycles.min())
    def trials_to_best(method, seed):
        return tune(space, TINY, _replay(problem, store), trials=len(space), method=method, seed=seed,
                    until=best).trials_to(best)

    trials = {m: [trials_to_best(m, s) for s in range(5)] for m in ("model", "random")}
    # measured (seeds 0-4): model 7-31 trials (mean 18.8), random 28-146 (mean 82.2); 2x margin
    assert np.mean(trials["model"]) * 2 < np.mean(trials["random"]), trials


def test_the_search_is_reproducible(problem, store):
    space, _ = problem
    runs = [tune(space, TINY, _replay(problem, store), trials=16, seed=3).order for _ in range(2)]
    assert runs[0] == runs[1]


def slow_on_some_points(task):
    if task.knobs["tile_w"] == 8 and task.knobs["oc_threads"] == 1:
        time.sleep(30)
    if task.knobs["tile_w"] == 4 and task.knobs["oc_threads"] == 1:
        raise RuntimeError("injected failure")
    return measure(task)


def test_hung_and_failing_trials_are_logged_and_the_search_goes_on(problem, tmp_path):
    space, _ = problem
    path = tmp_path / "log.jsonl"
    measurer = Measurer(store=None, workers=2, timeout_s=2.0, fn=slow_on_some_points)
    try:
        result = tune(space, TINY, measurer, trials=24, method="grid", batch=6, log_path=path)
    finally:
        measurer.close()
    statuses = [r.status for r in log.read(path)]
    assert len(statuses) == 24 and {"timeout", "error", "ok"} <= set(statuses)
    bad = [r for r in result.records if r.status != "ok"]
    assert all(r.cycles is None and r.error for r in bad)
    assert any("injected failure" in r.error for r in bad)
    assert result.best_cycles is not None


def test_log_round_trips_and_a_run_resumes_from_it(problem, store, tmp_path):
    space, _ = problem
    path = tmp_path / "log.jsonl"
    first = tune(space, TINY, _replay(problem, store), trials=8, log_path=path)
    records = log.read(path)
    assert records == first.records
    resumed = tune(space, TINY, _replay(problem, store), trials=20, log_path=path, resume=records, seed=1)
    records = log.read(path)
    assert len(records) == 20 and resumed.order[:8] == first.order
    assert len({tuple(sorted(r.knobs.items())) for r in records}) == 20
    assert log.best(records, space.workload, TINY).cycles == resumed.best_cycles
    assert log.best(records, space.workload, TINY.with_params(dram_latency_cycles=99)) is None


def test_a_cut_short_last_line_is_skipped_and_a_bad_line_is_named(tmp_path):
    path = tmp_path / "log.jsonl"
    good = {"workload_key": "w", "config": {"key": "c"}, "knobs": {}, "status": "ok"}
    path.write_text(log.json.dumps(good) + "\n" + '{"workload_key": "w", "conf')
    assert log.read(path) == [TrialRecord.from_json(good)]
    path.write_text("[1, 2]\n" + log.json.dumps(good) + "\n")
    with pytest.raises(ValueError, match=r"log.jsonl line 1: not a tuning record"):
        log.read(path)
    path.write_text("nope\n" + log.json.dumps(good) + "\n")
    with pytest.raises(ValueError, match=r"log.jsonl line 1: not JSON"):
        log.read(path)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"trials": 0}, "--trials must be at least 1, not 0"),
    ({"trials": 4, "batch": 0}, "--batch must be at least 1, not 0"),
    ({"trials": 4, "method": "nope"}, "unknown search method 'nope'"),
])
def test_bad_search_parameters(problem, store, kwargs, message):
    space, _ = problem
    with pytest.raises(ValueError, match=message):
        tune(space, TINY, _replay(problem, store), **kwargs)
