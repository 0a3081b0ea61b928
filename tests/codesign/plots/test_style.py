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
