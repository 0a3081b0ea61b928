"""The GPU tuner: the default first, the best point kept, infeasible points skipped."""

from __future__ import annotations

import pytest

from compiler.errors import ScheduleError
from compiler.ops.gpu import Knobs, MatMul
from compiler.target.gpu import gpu_preset
from compiler.tune.gpu import tune_op

SM80 = gpu_preset("sm_80")
OP = MatMul(1, 256, 256, 64)


def _cost(knobs: Knobs) -> float:
    """A stand-in for the device: bigger register tiles are faster; 4-wide k steps infeasible."""
    if knobs.tile_k == 4:
        raise ScheduleError("stand-in: infeasible")
    if not knobs.shared:
        return 1.0
    return 1.0 / ((knobs.tile_y // knobs.thread_y) * (knobs.tile_x // knobs.thread_x))


def test_the_best_measured_point_wins() -> None:
    result = tune_op(OP, SM80, _cost, points=40)
    space = OP.space(SM80)[:40]
    feasible = [k for k in space if k.tile_k != 4]
    assert result.best_s == min(min(_cost(k) for k in feasible), result.default_s)
    assert result.skipped == sum(k.tile_k == 4 for k in space) > 0
    assert result.speedup >= 1.0 and result.to_json()["measured"] == result.measured


def test_the_default_stays_unless_beaten() -> None:
    result = tune_op(OP, SM80, lambda k: 1.0, points=5)
    assert result.best == result.default == OP.default_knobs(SM80) and result.speedup == 1.0


def test_points_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"points must be >= 0, not -1"):
        tune_op(OP, SM80, lambda k: 1.0, points=-1)
