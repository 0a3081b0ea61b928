import pytest

from codesign.sweep.executor.scaling import ScalingModel, fit, predict
from hw.errors import InputError

# per worker: (1 s + 0.1 s) x (1 + 1/16) = 1.16875 s a point; the scheduler caps at 10 points/s
MODEL = ScalingModel(point_s=1.0, task_overhead_s=0.1, scheduler_tasks_per_s=10, startup_s=2,
                     ship_s_per_worker=0.5, cold_s=3)


def test_rate_and_wall_time_by_hand():
    assert MODEL.points_per_task == 1
    assert MODEL.points_per_s(4) == pytest.approx(4 / 1.16875)
    assert MODEL.wall_s(100, 4) == pytest.approx(2 + 4 * 0.5 + 3 + 100 * 1.16875 / 4)
    assert MODEL.saturating_workers == 11  # 10 / (1 / 1.16875) = 11.69
    assert MODEL.points_per_s(12) == MODEL.points_per_s(50) == 10


def test_the_fewest_workers_that_meet_a_deadline():
    assert MODEL.workers_for(100, MODEL.wall_s(100, 4)) == 4
    assert MODEL.workers_for(100, MODEL.wall_s(100, 4) - 0.01) == 5
    assert MODEL.workers_for(10_000, 100) is None  # 10 points/s at most: 1,000 s


def test_short_points_are_batched_as_the_executor_batches_them():
    fast = ScalingModel(point_s=0.1, task_overhead_s=0.1, scheduler_tasks_per_s=10)
    assert fast.points_per_task == 5
    assert fast.points_per_s(1) == pytest.approx(1 / ((0.1 + 0.1 / 5) * 1.0625))
    assert fast.points_per_s(1000) == 50


def test_a_fit_from_a_bench_result_and_its_prediction():
    bench = {"slots": 2, "s_per_point_per_slot": 0.8, "connect_s": 1.5, "ship_s": 0.6,
             "overhead": {"task_round_trip_ms": 12.0, "tasks_per_s": 300.0}}
    model = fit(bench)
    assert model == ScalingModel(point_s=0.8, task_overhead_s=0.012, scheduler_tasks_per_s=300.0,
                                 startup_s=1.5, ship_s_per_worker=0.3)
    figures = predict(model, points=100_000, within_s=3600)
    per_worker = 1 / (0.812 * 1.0625)
    assert figures["workers_needed"] == next(w for w in range(1, 100)
                                             if 1.5 + 0.3 * w + 100_000 / (w * per_worker) <= 3600)
    assert figures["points_per_s"]["2"] == round(2 * per_worker, 3)
    assert any("2-core" in line for line in figures["limits"])



def test_a_fit_takes_the_shipping_its_probe_measured_over_the_executors_start():
    # a LocalCluster's workers inherit the evaluation (ship_s ~0): the probe ships it as to a
    # running scheduler's workers
    bench = {"slots": 2, "s_per_point_per_slot": 0.8, "connect_s": 0.2, "ship_s": 0.01,
             "overhead": {"task_round_trip_ms": 12.0, "tasks_per_s": 300.0, "ship_s": 2.4}}
    assert fit(bench).ship_s_per_worker == 1.2

def test_bad_inputs():
    with pytest.raises(InputError, match=r"^the scaling model's point_s must be positive, not 0$"):
        ScalingModel(point_s=0, task_overhead_s=0.1, scheduler_tasks_per_s=10)
    with pytest.raises(InputError, match=r"^the scaling model needs a `codesign bench sweep --executor dask "
                                         r"--overhead` result$"):
        fit({"slots": 2, "s_per_point_per_slot": 1.0})
