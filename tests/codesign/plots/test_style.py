import itertools

import pytest

from codesign import plots


@pytest.mark.parametrize(("value", "text"), [(0.02, "0.02"), (2000, "2k"), (1.5e6, "1.5M"), (3e9, "3G")])
def test_number_labels(value, text):
    assert plots.number(value) == text


def test_short_names_keep_the_first_node_and_the_tail():
    assert plots.short("conv1+relu") == "conv1"
    assert plots.short("layer4.0.downsample.conv.relu", 10) == "…conv.relu"


def test_tick_names_drop_the_words_most_names_share():
    names = [f"encoder.layer.{i}.attention.self.{w}.Add.2d" for i in (0, 1)
             for w in ("query", "key", "value")]
    assert plots.tick_names(names + ["pooler.dense"]) == [
        "0.query", "0.key", "0.value", "1.query", "1.key", "1.value", "pooler.dense"]


def test_tick_names_keep_names_that_would_collide():
    names = ["a.x.conv", "a.y.conv", "b.x.conv", "b.y.conv"]  # dropping 'conv' keeps them apart
    assert plots.tick_names(names) == ["a.x", "a.y", "b.x", "b.y"]
    assert plots.tick_names(["conv1", "conv2"]) == ["conv1", "conv2"]  # too few to judge


def in_view(ticks, low, high):
    return [float(t) for t in ticks if low <= t <= high]


def test_log_ticks_are_1_2_5_per_decade_on_a_wide_axis():
    assert in_view(plots.LogTicks().tick_values(1, 1000), 1, 1000) == [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]


def test_log_ticks_on_an_axis_under_a_decade_take_every_multiple():
    # 5.8 M .. 12 M cycles: 1-2-5 ticks would leave 10M alone in view
    assert in_view(plots.LogTicks().tick_values(5.8e6, 1.2e7), 5.8e6, 1.2e7) == [6e6, 7e6, 8e6, 9e6, 1e7]


def test_log_ticks_on_a_narrow_axis_are_evenly_spaced():
    ticks = in_view(plots.LogTicks().tick_values(1.31, 1.37), 1.31, 1.37)
    assert len(ticks) >= 3 and ticks == sorted(ticks)
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1


def test_log_axes_label_an_axis_under_a_decade(tmp_path):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([5.8e6, 1.2e7], [1.3, 1.9], "o")
    plots.log_axes(ax, "xy")
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert {"6M", "8M", "10M"} <= set(labels)
