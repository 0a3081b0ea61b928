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


def test_nodes_that_only_feed_given_values_are_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value in `given` replaces its node's result: the nodes that only feed it are skipped
    (the reference check of a run leaves out the float parts before each Quantize)."""
    import compiler.graph.interp as interp

    ran: list[str] = []
    evaluate = interp.evaluate_node
    monkeypatch.setattr(interp, "evaluate_node", lambda g, n, xs: ran.append(n.op) or evaluate(g, n, xs))
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    b = np.full((2, 3), 5.0, np.float32)
    out = run_graph(chain(), {"x": x}, keep=["b"], given={"b": b})
    np.testing.assert_array_equal(out["c"], b + 1)
    np.testing.assert_array_equal(out["b"], b)
    assert ran == ["Add"]  # Relu and Identity only fed b
    ran.clear()
    out = run_graph(chain(), {"x": x}, keep=["a"], given={"b": b})
    assert ran == ["Relu", "Add"] and np.array_equal(out["a"], np.maximum(x, 0))  # a is kept: Relu runs
