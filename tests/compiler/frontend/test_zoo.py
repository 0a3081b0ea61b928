"""The model zoo's networks import, simplify to clean graphs and compute what onnxruntime
computes, at the zoo's default opset and its oldest."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from compiler.graph import run_graph
from tests.compiler.frontend.onnx_models import import_and_simplify, ort_run

zoo = pytest.importorskip("codesign.zoo")


@pytest.mark.parametrize(
    "name,oldest",
    [("resnet18", False), ("mobilenetv2", False), ("mobilenetv2", True), ("bert-tiny", False)],
    ids=["resnet18", "mobilenetv2", "mobilenetv2-oldest-opset", "bert-tiny"],
)
def test_zoo_model(name: str, oldest: bool) -> None:
    opset = zoo.info(name).min_opset if oldest else zoo.DEFAULT_OPSET
    model = zoo.build(name, opset=opset)
    graph = import_and_simplify(model)
    ops = Counter(n.op for n in graph.nodes)
    assert not {"BatchNormalization", "Identity", "Dropout", "Constant", "Shape"} & set(ops)
    if name != "bert-tiny":
        assert ops["Gemm"] == 1 and ops["Flatten"] == 1
    feeds = zoo.sample_inputs(name, 1, seed=3)[0]
    expected, got = ort_run(model, feeds), run_graph(graph, feeds)
    for key, ref in expected.items():
        np.testing.assert_allclose(got[key], ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
