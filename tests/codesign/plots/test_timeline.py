import numpy as np
import pytest

from codesign import plots
from sim.trace import Activity, Interval


def _activity(cycles: int, load: list[tuple[int, int]], compute: list[tuple[int, int]]) -> Activity:
    act = Activity("timing", cycles)
    act.tracks["load"] = [Interval(a, b) for a, b in load]
    act.tracks["compute"] = [Interval(a, b) for a, b in compute]
    act.tracks["store"] = [Interval(cycles - 5, cycles)]
    return act


def test_busy_mask_marks_the_busy_cycles():
    mask = plots.busy_mask(_activity(20, [(2, 5), (8, 9)], []), "load")
    assert np.flatnonzero(mask).tolist() == [2, 3, 4, 8]


@pytest.mark.parametrize(("load", "compute", "want"), [
    ([(0, 10)], [(10, 20)], 0.0),            # one after the other: nothing hidden
    ([(0, 10)], [(5, 20)], 0.5),
    ([(10, 20)], [(0, 30)], 1.0),            # all loading behind compute
    ([], [(0, 30)], 0.0),
])
def test_overlap_fraction_is_the_share_of_load_cycles_under_compute(load, compute, want):
    assert plots.overlap_fraction(_activity(40, load, compute)) == want


def test_timeline_figure_draws_a_lane_per_track_and_the_overlap(tmp_path):
    serial = _activity(100, [(0, 20), (40, 60)], [(20, 40), (60, 95)])
    hidden = _activity(70, [(0, 20), (20, 40)], [(20, 65)])
    fig = plots.timeline_figure([("1 thread", serial), ("2 threads", hidden)], title="t")
    first, second = fig.axes
    assert [t.get_text() for t in first.get_yticklabels()] == ["load ∧ compute", "store", "compute", "load"]
    lanes = {c.get_label(): c for c in second.collections}
    overlap = lanes["load ∧ compute"].get_paths()
    assert len(overlap) == 1  # cycles 20-40, one span
    assert overlap[0].get_extents().x0 == 20 and overlap[0].get_extents().x1 == 40
    assert "0% of load cycles overlap compute" in first.get_title(loc="left")
    assert "50% of load cycles" in second.get_title(loc="left")
    assert first.get_xlim() == (0, 100) and second.get_xlabel() == "time (cycles from start)"
    assert plots.save_as(fig, tmp_path / "t.svg").read_text().startswith("<?xml")


def test_a_window_shows_only_those_cycles_and_an_empty_run_still_draws():
    fig = plots.timeline_figure([("a", _activity(100, [(0, 20)], [(20, 90)]))], window=(10, 30))
    assert fig.axes[0].get_xlim() == (10, 30)
    empty = plots.timeline_figure([("none", Activity("timing", 0))])
    assert empty.axes[0].get_xlim() == (0, 1)
