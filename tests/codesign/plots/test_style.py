import pytest

from codesign import plots


@pytest.mark.parametrize(("value", "text"), [(0.02, "0.02"), (2000, "2k"), (1.5e6, "1.5M"), (3e9, "3G")])
def test_number_labels(value, text):
    assert plots.number(value) == text


def test_short_names_keep_the_first_node_and_the_tail():
    assert plots.short("conv1+relu") == "conv1"
    assert plots.short("layer4.0.downsample.conv.relu", 10) == "…conv.relu"
