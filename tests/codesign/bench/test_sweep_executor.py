import dataclasses

import pytest

from codesign.bench import sweep_executor
from codesign.cli import main
from codesign.sweep import pipeline
from codesign.sweep.engine import run_sweep
from codesign.sweep.executor import ExecutorSpec

from ..sweep.conftest import fake_evaluate, fake_metrics, tiny_space  # noqa: F401 (a fixture)


def skewed(point):
    """fake_evaluate with latency 10% higher on block_in 16."""
    result = fake_evaluate(point)
    if point.config.block_in != 16:
        return result
    metrics = {**result.metrics, "latency_cycles": result.metrics["latency_cycles"] * 1.1}
    return dataclasses.replace(result, metrics=metrics)


def test_two_stores_compared(tmp_path, tiny_space):  # noqa: F811
    for name, evaluate in (("a", fake_evaluate), ("b", fake_evaluate), ("c", skewed)):
        run_sweep(tiny_space, tmp_path / f"{name}.db", evaluate, strategy="grid", workers=0)
    same = sweep_executor.compare(tmp_path / "a.db", tmp_path / "b.db")
    assert same == sweep_executor.Comparison(18, 18, True, 18, 18, 0.0)
    skew = sweep_executor.compare(tmp_path / "a.db", tmp_path / "c.db")
    feasible16 = [p for p in tiny_space if p.config.block_in == 16]
    assert skew.identical_metrics == 18 - len(feasible16) and skew.same_status == 18
    assert skew.max_relative_difference == pytest.approx(0.1 / 1.1, abs=1e-6)


def test_the_bench_on_the_local_executor(tmp_path, tiny_space, monkeypatch):  # noqa: F811
    monkeypatch.setattr(pipeline, "make_evaluate", lambda space: fake_evaluate)
    result = sweep_executor.run(tiny_space, tmp_path / "s.db", ExecutorSpec("local"), workers=2, budget=5)
    data = result.to_json()
    assert data["points"] == 5 and data["slots"] == 2 and data["by_status"]["ok"] == 5
    assert 0 < data["points_per_s"] <= data["points_per_s_steady"]  # the start counts in the first only
    assert "scaling" not in data and data["overhead"] is None
    assert fake_metrics  # the fake's metrics are what the store holds


@pytest.mark.parametrize(("argv", "message"), [
    (["--executor", "ray"], "--executor must be local, dask or dask://HOST:PORT, not 'ray'"),
    (["--budget", "0"], "--budget must be at least 1, not 0"),
    (["--executor", "dask", "--workers", "0"], "--executor dask needs --workers 1 or more, not 0"),
])
def test_bad_bench_options_are_one_line_with_status_2(capsys, argv, message):
    code = main(["bench", "sweep", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert __import__("re").search(message, err)
