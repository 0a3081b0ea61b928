"""split_groups: a grouped convolution as group-1 pieces (block-diagonal where groups are narrow)
computes what it computed; and a ShuffleNet-style model offloads >= 90% of its MACs to the
accelerator, exact against the integer reference on fsim (and on the RTL, under `rtl`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from codesign.cli import main
from compiler.graph import run_graph
from compiler.graph.passes.split_groups import pack_factor, split_groups
from tests.compiler.frontend.onnx_models import Builder, import_and_simplify
from tests.compiler.graph.passes.shufflenet import shufflenet_units


def _conv(c: int, m: int, groups: int, k: int = 1, bias: bool = True, **attrs: object) -> onnx.ModelProto:
    b = Builder(13)
    inputs = ["x", b.weight("w", [m, c // groups, k, k])] + ([b.weight("b", [m])] if bias else [])
    return b.model({"x": [2, c, 6, 5]}, [b.op("Conv", inputs, "y", group=groups, **attrs)])


@pytest.mark.parametrize(("c", "m", "groups", "k", "block_in", "pieces"), [
    (48, 24, 3, 1, 16, 3),   # 16 input channels a group: one group a piece
    (32, 32, 8, 3, 16, 2),   # 4 a group: packed 4 to a piece, block-diagonal (ResNeXt-style 3x3)
    (12, 6, 6, 1, 16, 1),    # 2 a group, 12 in all: one block-diagonal piece
])
def test_split_computes_the_same(c: int, m: int, groups: int, k: int, block_in: int, pieces: int) -> None:
    pads = [1, 0, 0, 1] if k == 3 else [0] * 4
    graph = import_and_simplify(_conv(c, m, groups, k, strides=[2, 1], pads=pads))
    split = split_groups(graph, block_in)
    convs = [n for n in split.nodes if n.op == "Conv"]
    assert len(convs) == pieces and all(n.int_attr("group") == 1 for n in convs)
    x = {"x": np.random.default_rng(0).normal(size=(2, c, 6, 5)).astype(np.float32)}
    np.testing.assert_allclose(run_graph(split, x)["y"], run_graph(graph, x)["y"], rtol=1e-5, atol=1e-5)


def test_depthwise_and_plain_convolutions_are_left() -> None:
    for model in (_conv(8, 8, 8, 3), _conv(8, 16, 8, 3, bias=False), _conv(8, 4, 1)):
        graph = import_and_simplify(model)
        assert [n.op for n in split_groups(graph).nodes] == [n.op for n in graph.nodes]


def test_pack_factor() -> None:
    assert pack_factor(3, 80, 16) == 1
    assert pack_factor(8, 4, 16) == 4
    assert pack_factor(6, 4, 16) == 6  # 2 and 3 groups are too narrow; 6 fill it
    assert pack_factor(5, 2, 16) == 5  # no divisor fills the block: all in one piece


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> dict[str, object]:
    path = tmp_path / "shufflenet.onnx"
    onnx.save(shufflenet_units(), path)
    assert main(["run", str(path), "--config", "vta", "--backend", backend, "--json"]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def test_shufflenet_offloads_its_grouped_convolutions(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Must-show 4 (fsim): the grouped 1x1 convolutions run on the accelerator; only the
    depthwise 3x3s, the shuffles and the classifier stay on the host."""
    report = _run(tmp_path, capsys, "fsim")
    assert report["correct_int8"] is True
    assert isinstance(report["offloaded_macs_fraction"], float) and report["offloaded_macs_fraction"] >= 0.9


@pytest.mark.rtl
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not installed")
def test_shufflenet_exact_on_the_rtl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _run(tmp_path, capsys, "rtl")
    assert report["correct_int8"] is True and report["offloaded_macs_fraction"] >= 0.9  # type: ignore[operator]
