"""The schedule-quality benchmark's exhaustive best is the true best when nothing is pruned, its
prune check fails when a pruned point could be faster, its cache of exhaustive searches gives
back what was put in and refuses a file made otherwise, and the sweep benchmarks refuse bad counts."""

from __future__ import annotations

import json
import re

import pytest

from codesign.bench import sweep_eval, sweep_quality
from codesign.sweep.programs import ProgramCache
from codesign.sweep.schedules import ranking
from compiler.ops.accel import Dense, DenseSpec, Epilogue, compile_op
from compiler.target.accel import AcceleratorTarget
from hw.config import PRESETS
from hw.errors import InputError
from sim.backends import make_backend

EP = Epilogue(channel_multiplier=True, scaled_bias=True)


def _op_and_backend():
    cfg = PRESETS["tiny"]
    return Dense(DenseSpec(1, 64, 40, EP), AcceleratorTarget(cfg)), make_backend("timing", cfg)


def test_exhaustive_without_a_prune_is_the_best_of_the_space():
    op, backend = _op_and_backend()
    found = sweep_quality.exhaustive(op, backend, ProgramCache(), window=1e9, cap=10**6)
    points = ranking(op)
    every = [backend.run(compile_op(op, k).built.program, None).stats.cycles for k in points]
    assert (found.best, found.measured, found.pruned_estimate) == (min(every), len(every), float("inf"))
    assert found.low_ratio == min(c / points.estimate(i) for i, c in enumerate(every))


def test_a_capped_search_reports_its_first_pruned_point():
    op, backend = _op_and_backend()
    found = sweep_quality.exhaustive(op, backend, ProgramCache(), window=1e9, cap=2)
    assert found.measured == 2 and found.pruned_estimate == ranking(op).estimate(2)


def test_a_prune_is_safe_when_no_pruned_point_could_be_faster():
    rows = [{"low_ratio": 0.8, "pruned_estimate": 200.0, "best": 150},
            {"low_ratio": 0.9, "pruned_estimate": 200.0, "best": 170},
            {"low_ratio": 1.0, "pruned_estimate": float("inf"), "best": 10**9}]
    assert [r["safe"] for r in sweep_quality.mark_safe(rows)] == [True, False, True]


def test_the_exhaustive_candidates_are_the_measured_points_by_rank():
    op, backend = _op_and_backend()
    found = sweep_quality.exhaustive(op, backend, ProgramCache(), window=1e9, cap=3)
    points = ranking(op)
    ranked = [(r, json.loads(k)) for r, k, _ in found.candidates]
    assert ranked == [(i, points[i].to_json()) for i in range(3)]
    assert min(c for _, _, c in found.candidates) == found.best


def test_a_best_cache_gives_back_its_searches_from_the_file(tmp_path):
    op, backend = _op_and_backend()
    path = tmp_path / "best.json"
    cache = sweep_quality.BestCache(path, window=1e9, cap=4)
    found = cache.put(op.target.cfg, op, sweep_quality.exhaustive(op, backend, ProgramCache(), 1e9, 4))
    cache.save()
    again = sweep_quality.BestCache(path, window=1e9, cap=4).get(op.target.cfg, op)
    assert again == found and again is not None and again.candidates == found.candidates
    other = Dense(DenseSpec(1, 64, 48, EP), op.target)
    assert sweep_quality.BestCache(path, window=1e9, cap=4).get(op.target.cfg, other) is None


def test_a_best_cache_made_with_another_prune_is_refused(tmp_path):
    path = tmp_path / "best.json"
    sweep_quality.BestCache(path, window=1.5, cap=8).save()
    message = f"--best-cache {path}: made with window 1.5 and cap 8, not 1.6 and 64"
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        sweep_quality.BestCache(path)


def test_a_file_that_is_not_a_best_cache_is_refused(tmp_path):
    path = tmp_path / "best.json"
    path.write_text('{"window": 1.6}')
    message = f"--best-cache {path}: not a best cache ('cap')"
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        sweep_quality.BestCache(path)


@pytest.mark.parametrize(("run", "kwargs", "message"), [
    (sweep_eval.run, {"points": 0}, "--points must be at least 1, not 0"),
    (sweep_eval.run, {"points": 2, "workers": 0}, "--workers must be at least 1, not 0"),
    (sweep_quality.quality, {"points": 0}, "--points must be at least 1, not 0"),
])
def test_bad_counts_are_refused(run, kwargs, message):
    with pytest.raises(InputError, match=f"^{message}$"):
        run(**kwargs)
