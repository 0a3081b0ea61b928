import os
import time

import pytest

from codesign.exec.pool import Pool


def work(item):
    if item == "hang":
        time.sleep(60)
    if item == "boom":
        raise RuntimeError("boom")
    if item == "crash":
        os._exit(3)
    return {"status": "ok", "value": item * 2}


def test_a_hung_a_crashed_and_a_failing_task_cost_only_their_own_results():
    items = [1, "hang", 2, "crash", 3, "boom", 4]
    start = time.monotonic()
    with Pool(work, workers=2, timeout_s=1.0) as pool:
        results = dict(pool.run(items))
    assert time.monotonic() - start < 20
    assert sorted(results) == list(range(len(items)))
    assert [results[i]["value"] for i in (0, 2, 4, 6)] == [2, 4, 6, 8]
    assert results[1]["status"] == "timeout" and "no result within 1 s" in results[1]["error"]
    assert results[3]["status"] == "crash" and "exit code 3" in results[3]["error"]
    assert results[5]["status"] == "error" and "RuntimeError: boom" in results[5]["error"]


def test_in_process_pool_runs_in_order_and_catches_errors():
    pool = Pool(work, workers=0)
    assert list(pool.run([1, "boom"])) == [(0, {"status": "ok", "value": 2}),
                                           (1, {"status": "error", "error": "RuntimeError: boom"})]


def test_failures_take_the_type_the_pool_is_given():
    def fail(status, reason):
        return (status, reason.splitlines()[0])

    pool = Pool(work, workers=0, fail=fail)
    assert list(pool.run([1, "boom"])) == [(0, {"status": "ok", "value": 2}),
                                           (1, ("error", "RuntimeError: boom"))]
    with Pool(work, workers=2, timeout_s=1.0, fail=fail) as pool:
        results = dict(pool.run(["boom", "crash", "hang"]))
    assert results == {0: ("error", "RuntimeError: boom"), 1: ("crash", "the worker died (exit code 3)"),
                       2: ("timeout", "no result within 1 s; the worker was killed")}


@pytest.mark.parametrize(("kwargs", "message"), [({"workers": -1}, "workers must be at least 0, not -1"),
                                                 ({"timeout_s": 0}, "timeout_s must be positive, not 0")])
def test_bad_pool_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Pool(work, **kwargs)
