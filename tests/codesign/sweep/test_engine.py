import contextlib
import faulthandler
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from codesign.sweep.engine import run_sweep
from codesign.sweep.pareto import non_dominated
from codesign.sweep.space import SpaceError, space_from_text
from codesign.sweep.store import SweepStore
from hw.errors import InputError

from .conftest import TINY_SPACE, fake_evaluate, fake_metrics

ROOT = Path(__file__).resolve().parents[3]


class Counting:
    """An evaluation that appends each point's id to a side file as it finishes."""

    def __init__(self, path, delay_s=0.0):
        self.path, self.delay_s = path, delay_s

    def __call__(self, point):
        time.sleep(self.delay_s)
        with open(self.path, "a") as f:
            f.write(point.id + "\n")
        return fake_evaluate(point)

    def counts(self):
        ids = Path(self.path).read_text().split() if Path(self.path).exists() else []
        return {i: ids.count(i) for i in ids}


def test_a_grid_sweep_stores_every_point_and_finds_the_front(tmp_path, tiny_space):
    notes = []
    summary = run_sweep(tiny_space, tmp_path / "s.db", fake_evaluate, strategy="grid", workers=2,
                        timeout_s=30, progress=lambda d, t, n: notes.append((d, t, n)))
    assert summary.by_status == {"ok": 9, "infeasible": 9, "error": 0, "timeout": 0, "crash": 0}
    assert summary.evaluated == summary.evaluated_now == 9 and summary.failures == 0
    feasible = list(tiny_space)
    values = np.array([[fake_metrics(p.config)[m] for m in tiny_space.metrics] for p in feasible])
    expected = {p.id for p, keep in zip(feasible, non_dominated(values), strict=True) if keep}
    assert {p.id for p in summary.front} == expected and len(expected) >= 2
    assert [d for d, _, _ in notes] == list(range(1, 10)) and {t for _, t, _ in notes} == {9}
    best = min(v[0] for v in values)
    assert notes[-1][2].startswith(f"failed 0  best latency_cycles {best:.4g}")
    with SweepStore.read(tmp_path / "s.db") as store:
        infeasible = store.points("infeasible")
        assert all("bytes of SRAM is over max_sram_bytes 12288" in r.reason for r in infeasible)
        assert all(r.attempts == 1 and r.wall_s is not None for r in store.points("ok"))


def test_a_budget_then_a_resume_evaluates_each_point_once(tmp_path, tiny_space):
    count = Counting(tmp_path / "evals.txt")
    first = run_sweep(tiny_space, tmp_path / "s.db", count, strategy="random", seed=3, budget=5, workers=0)
    assert first.evaluated == 5 and first.evaluated_now == 5
    again = run_sweep(tiny_space, tmp_path / "s.db", count, strategy="random", seed=3, workers=2, resume=True)
    assert again.evaluated == 9 and again.evaluated_now == 4
    assert sorted(count.counts().values()) == [1] * 9
    done = run_sweep(tiny_space, tmp_path / "s.db", count, strategy="random", seed=3, workers=2, resume=True)
    assert done.evaluated_now == 0 and len(count.counts()) == 9


def test_random_sweeps_with_one_seed_evaluate_the_same_points(tmp_path, tiny_space):
    ids = []
    for name in ("a", "b"):
        run_sweep(tiny_space, tmp_path / f"{name}.db", fake_evaluate, strategy="random", seed=5, budget=4,
                  workers=0)
        with SweepStore.read(tmp_path / f"{name}.db") as store:
            ids.append([r.id for r in store.points() if r.status == "ok"])
    assert ids[0] == ids[1] and len(ids[0]) == 4


def faulty(point):
    """Segfaults on block_in 8 x block_out 8, hangs on 16 x 16, raises on 4 x 16."""
    shape = (point.config.block_in, point.config.block_out)
    if shape == (8, 8):
        faulthandler.disable()  # pytest's handler would print the worker's stack
        os.kill(os.getpid(), signal.SIGSEGV)
    if shape == (16, 16):
        time.sleep(60)
    if shape == (4, 16):
        raise RuntimeError("the compiler gave up")
    return fake_evaluate(point)


def test_a_segfault_a_hang_and_an_exception_are_recorded_and_the_sweep_goes_on(tmp_path, tiny_space):
    start = time.monotonic()
    summary = run_sweep(tiny_space, tmp_path / "s.db", faulty, strategy="grid", workers=2, timeout_s=2)
    assert time.monotonic() - start < 30
    assert summary.by_status == {"ok": 6, "infeasible": 9, "error": 1, "timeout": 1, "crash": 1}
    with SweepStore.read(tmp_path / "s.db") as store:
        rows = {(r.config["block_in"], r.config["block_out"]): r for r in store.points() if r.status != "ok"
                and r.status != "infeasible"}
    assert rows[(8, 8)].status == "crash" and rows[(8, 8)].attempts == 2
    assert rows[(8, 8)].reason == "the worker died (exit code -11)"
    assert rows[(16, 16)].status == "timeout" and rows[(16, 16)].wall_s == 2
    assert rows[(16, 16)].reason == "no result within 2 s; the worker was killed"
    assert rows[(4, 16)].status == "error"
    assert rows[(4, 16)].reason.startswith("RuntimeError: the compiler gave up")
    assert "Traceback" in rows[(4, 16)].reason


def test_an_evaluation_returning_the_wrong_point_is_an_error(tmp_path, tiny_space):
    first = next(iter(tiny_space))
    summary = run_sweep(tiny_space, tmp_path / "s.db", lambda p: fake_evaluate(first), strategy="grid",
                        workers=0, budget=2)
    assert summary.by_status["ok"] == 1 and summary.by_status["error"] == 1
    with SweepStore.read(tmp_path / "s.db") as store:
        (row,) = store.points("error")
    assert row.reason == f"evaluate returned {first.id}, not a PointResult of point {row.id}"


SCRIPT = '''
import sys, time
from pathlib import Path
from codesign.sweep.engine import run_sweep
from codesign.sweep.space import space_from_text
sys.path.insert(0, {tests!r})
from conftest import TINY_SPACE, fake_evaluate

def evaluate(point):
    time.sleep(0.4)
    with open({side!r}, "a") as f:
        f.write(point.id + "\\n")
    return fake_evaluate(point)

space = space_from_text(TINY_SPACE, path={space!r})
run_sweep(space, {store!r}, evaluate, strategy="random", seed=1, workers=2, resume=True)
'''


def committed_ok(path):
    if not path.exists():
        return set()
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return {row[0] for row in db.execute("SELECT id FROM points WHERE status = 'ok'")}
    except sqlite3.OperationalError:  # the tables are not made yet
        return set()


def test_a_sweep_killed_mid_way_resumes_losing_and_repeating_no_stored_point(tmp_path, tiny_space):
    store, side = tmp_path / "s.db", tmp_path / "evals.txt"
    script = tmp_path / "sweep.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent), side=str(side),
                                    space=str(tmp_path / "t.toml"), store=str(store)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, str(script)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(committed_ok(store)) < 3 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)  # the coordinator only: its workers are left to notice
        child.wait()
    finally:
        time.sleep(0.3)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # workers still alive, if any
    stored = committed_ok(store)
    assert 3 <= len(stored) < 9, "the sweep was killed mid-way"
    count = Counting(side)
    summary = run_sweep(tiny_space, store, count, strategy="random", seed=1, workers=2, resume=True)
    assert summary.by_status["ok"] == 9 and summary.evaluated_now == 9 - len(stored)
    counts = count.counts()
    assert all(counts[i] == 1 for i in stored), "a point stored before the kill was evaluated again"
    assert set(counts) == committed_ok(store)
    assert sum(counts.values()) <= 9 + 2  # at most the two in flight at the kill evaluated twice


def test_a_space_without_a_feasible_point(tmp_path):
    space = space_from_text(TINY_SPACE.replace('"12KiB"', '"1KiB"'), path=tmp_path / "t.toml")
    message = r"t.toml: the space has no feasible point \(combinations 18, invalid 0, sram 18, macs 0, "
    with pytest.raises(SpaceError, match=message + r"area 0, feasible 0\)"):
        run_sweep(space, tmp_path / "s.db", fake_evaluate, workers=0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"budget": 0}, "--budget must be at least 1, not 0"),
    ({"workers": -1}, "--workers must be at least 0, not -1"),
    ({"timeout_s": 0}, "--timeout must be positive, not 0"),
    ({"batch": 0}, "batch must be at least 1, not 0"),
    ({"strategy": "annealing"}, r"unknown strategy 'annealing' \(one of grid, random, nsga2, surrogate\)"),
])
def test_bad_options(tmp_path, tiny_space, kwargs, message):
    with pytest.raises(InputError, match=message):
        run_sweep(tiny_space, tmp_path / "s.db", fake_evaluate, **kwargs)
    assert not (tmp_path / "s.db").exists()


def test_the_summary_as_json(tmp_path, tiny_space):
    summary = run_sweep(tiny_space, tmp_path / "s.db", fake_evaluate, strategy="random", workers=0)
    data = json.loads(json.dumps(summary.to_json()))
    assert data["points_evaluated"] == 9 and data["failures"] == {"error": 0, "timeout": 0, "crash": 0}
    assert data["infeasible"] == 9 and data["store"] == str(tmp_path / "s.db")
    assert [set(p) for p in data["pareto"]] == [{"id", "latency_cycles", "area_mm2"}] * len(data["pareto"])
