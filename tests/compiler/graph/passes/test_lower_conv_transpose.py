"""lower_conv_transpose: the stride-1 and kernel == stride transposed convolutions as
convolutions computing what they computed; the rest left; and a decoder whose 2x2/2 upsampling
runs on the accelerator, exact against the integer reference on fsim."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from codesign.cli import main
from compiler.graph import run_graph
from compiler.graph.passes.lower_conv_transpose import lower_conv_transpose
from tests.compiler.frontend.onnx_models import Builder, import_and_simplify


def _deconv(c: int, m: int, k: int, bias: bool = True, **attrs: object) -> onnx.ModelProto:
    b = Builder(13)
    g = int(attrs.get("group", 1))  # type: ignore[call-overload]
    inputs = ["x", b.weight("w", [c, m // g, k, k])] + ([b.weight("b", [m])] if bias else [])
    return b.model({"x": [2, c, 5, 6]}, [b.op("ConvTranspose", inputs, "y", **attrs)])


@pytest.mark.parametrize(("model", "ops"), [
    (_deconv(4, 6, 3), ["Conv"]),
    (_deconv(4, 6, 3, bias=False, pads=[1, 0, 2, 1], dilations=[2, 1]), ["Conv"]),
    (_deconv(4, 6, 3, group=2), ["Conv"]),
    (_deconv(4, 6, 2, strides=[2, 2]), ["Conv", "Reshape", "Transpose", "Reshape"]),
    (_deconv(4, 6, 3, bias=False, strides=[3, 3]), ["Conv", "Reshape", "Transpose", "Reshape"]),
])
def test_lowered_computes_the_same(model: onnx.ModelProto, ops: list[str]) -> None:
    graph = import_and_simplify(model)
    lowered = lower_conv_transpose(graph)
    assert [n.op for n in lowered.nodes] == ops
    x = {"x": np.random.default_rng(0).normal(size=(2, 4, 5, 6)).astype(np.float32)}
    np.testing.assert_allclose(run_graph(lowered, x)["y"], run_graph(graph, x)["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", [
    _deconv(4, 6, 3, strides=[2, 2]),                  # stride != kernel
    _deconv(4, 6, 3, pads=[3, 0, 0, 0]),               # a pad past the kernel's span
    _deconv(4, 6, 2, strides=[2, 2], output_padding=[1, 1]),
])
def test_other_forms_are_left(model: onnx.ModelProto) -> None:
    graph = import_and_simplify(model)
    assert [n.op for n in lower_conv_transpose(graph).nodes] == ["ConvTranspose"]


def _decoder() -> onnx.ModelProto:
    b = Builder(13)
    conv = b.op("Conv", ["x", b.weight("w0", [32, 32, 3, 3]), b.weight("b0", [32])], pads=[1] * 4)
    h = b.op("Relu", [conv])
    up = b.op("ConvTranspose", [h, b.weight("w1", [32, 32, 2, 2], 0.2), b.weight("b1", [32])], strides=[2, 2])
    d = b.op("ConvTranspose", [b.op("Relu", [up]), b.weight("w2", [32, 16, 3, 3], 0.2)], pads=[1] * 4)
    y = b.op("Conv", [b.op("Relu", [d]), b.weight("w3", [8, 16, 1, 1])], "y")  # stays float: the output
    return b.model({"x": [1, 32, 8, 8]}, [y])


def test_decoder_upsampling_on_the_accelerator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "decoder.onnx"
    onnx.save(_decoder(), path)
    assert main(["run", str(path), "--config", "vta", "--backend", "fsim", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # all but the last 1x1 convolution, which the quantizer keeps float as the graph's output
    assert report["correct_int8"] is True and report["offloaded_macs_fraction"] > 0.98
