"""Hand-built graphs for pass tests, and the check every pass test makes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compiler.graph import Graph, print_graph, run_graph, verify
from compiler.graph.builder import append

NodeSpec = tuple[str, Sequence[str], str, Mapping[str, object]]


def make(
    inputs: Mapping[str, tuple[int, ...]],
    consts: Mapping[str, np.ndarray],
    nodes: Sequence[NodeSpec],
    outputs: Sequence[str],
) -> Graph:
    """A verified graph: float32 inputs, constants, (op, inputs, output, attrs) nodes in order."""
    g = Graph()
    for name, shape in inputs.items():
        g.add_input(name, shape, "float32")
    for name, data in consts.items():
        g.add_const(name, np.asarray(data))
    for op, ins, out, attrs in nodes:
        append(g, op, ins, [out], attrs)
    g.outputs = list(outputs)
    return verify(g)


def check_pass(pass_fn: Callable[[Graph], Graph], graph: Graph, expected: str, rename: bool = False) -> Graph:
    """Run the pass: the result verifies, prints as `expected`, computes what the input graph
    computes (seeded inputs, float32 tolerance), and the input graph is left unchanged."""
    before = print_graph(graph)
    out = verify(pass_fn(graph))
    assert print_graph(graph) == before, "the pass changed its input graph"
    assert print_graph(out, rename=rename) == expected
    rng = np.random.default_rng(0)
    feeds = {n: rng.normal(size=graph.values[n].shape).astype(np.float32) for n in graph.inputs}
    want, got = run_graph(graph, feeds), run_graph(out, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)
    return out
