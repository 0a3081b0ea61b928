"""The reference interpreter: inputs checked at the boundary, results typed as declared."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from compiler.errors import GraphError
from compiler.graph import Value, run_graph
from tests.compiler.graph.test_ir import chain


def test_runs_the_graph() -> None:
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    out = run_graph(chain(), {"x": x})
    np.testing.assert_array_equal(out["c"], np.maximum(x, 0) + 1)
    assert out["c"].dtype == np.float32


@pytest.mark.parametrize(
    "feeds,match",
    [
        ({}, r"^missing input x$"),
        ({"x": np.zeros((2, 3), np.float32), "z": np.zeros(1)}, r"^unknown input z \(graph inputs: x\)$"),
        ({"x": np.zeros((3, 2), np.float32)}, r"^input x has shape \(3, 2\), the graph expects \(2, 3\)$"),
        ({"x": np.zeros((2, 3), np.float64)}, r"^input x has dtype float64, the graph expects float32$"),
    ],
    ids=["missing", "unknown", "shape", "dtype"],
)
def test_bad_inputs(feeds: dict[str, np.ndarray], match: str) -> None:
    with pytest.raises(GraphError, match=match):
        run_graph(chain(), feeds)


def test_an_evaluator_disagreeing_with_the_declared_type_is_caught() -> None:
    g = chain()
    g.values["a"] = Value("a", (2, 3), "float32")
    g.nodes[0] = replace(g.nodes[0], op="Cast", attrs={"to": "float64"})  # declared float32
    with pytest.raises(
        GraphError, match=r"^node a \(Cast\): evaluated float64\[2,3\] for output a, declared float32\[2,3\]$"
    ):
        run_graph(g, {"x": np.zeros((2, 3), np.float32)})


def test_graph_input_as_output() -> None:
    g = chain()
    g.outputs.append("x")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(run_graph(g, {"x": x})["x"], x)
