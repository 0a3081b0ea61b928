"""compiler.driver: ONNX -> quantized graph -> CompiledModel, with the caller's calibration data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.driver import QuantOptions, compile_graph, compile_onnx, is_qdq
from compiler.frontend import import_onnx
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from hw.errors import InputError
from tests.compiler.quant.ort_models import quantize_qdq, small_resnet

TARGET = AcceleratorTarget(PRESETS["tiny"])


def _calibration(n: int = 4) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(n)]


@pytest.fixture(scope="module")
def float_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("driver") / "small.onnx"
    onnx.save(small_resnet(), path)
    return path


def test_compile_onnx_is_import_then_compile_graph(float_path):
    seen = []

    def calibration(graph):  # the graph it is given is the imported one, its inputs' shapes known
        seen.append(graph.values["x"].shape)
        return _calibration()

    model = compile_onnx(float_path, TARGET, calibration)
    same = compile_graph(import_onnx(str(float_path)), TARGET, _calibration())
    assert seen == [(1, 3, 12, 12)]
    assert [(n.op, n.inputs, n.outputs) for n in model.graph.nodes] == \
        [(n.op, n.inputs, n.outputs) for n in same.graph.nodes]
    assert [s.where for s in model.steps] == [s.where for s in same.steps]
    assert "accel" in [s.where for s in model.steps]


def test_a_float_layer_pattern_must_match_a_layer(float_path):
    quant = QuantOptions(float_layers=("nothing*",))
    with pytest.raises(InputError, match=r"^--float-layers 'nothing\*' matches no convolution or dense"):
        compile_onnx(float_path, TARGET, lambda g: _calibration(), quant=quant)


def test_a_qdq_model_keeps_its_scales_and_refuses_float_layers(tmp_path):
    path = tmp_path / "qdq.onnx"
    onnx.save(quantize_qdq(small_resnet(), _calibration(8), tmp_path), path)
    assert is_qdq(import_onnx(str(path)))
    message = r"qdq\.onnx is quantized already \(QuantizeLinear/DequantizeLinear\): --float-layers applies"
    with pytest.raises(InputError, match=message + " to a float model$"):
        compile_onnx(path, TARGET, lambda g: _calibration(), quant=QuantOptions(float_layers=("*",)))
