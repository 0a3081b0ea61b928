"""The verifier: each broken invariant is reported with the node (or value) and the problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from compiler.errors import GraphError
from compiler.graph import Graph, Node, Value, verify
from tests.compiler.graph.test_ir import chain


def _break(fn: Callable[[Graph], None]) -> Graph:
    g = chain()
    fn(g)
    return g


def _set_node(g: Graph, i: int, node: Node) -> None:
    g.nodes[i] = node


BROKEN: dict[str, tuple[Callable[[Graph], None], str]] = {
    "unknown-op": (
        lambda g: _set_node(g, 0, replace(g.nodes[0], op="Frobnicate")),
        r"^node a \(Frobnicate\): unknown op$",
    ),
    "arity": (
        lambda g: _set_node(g, 2, g.nodes[2].with_inputs(["b"])),
        r"^node c \(Add\): 1 inputs, expected 2 to 2$",
    ),
    "missing-attr": (
        lambda g: _set_node(g, 0, Node("Clip", ("x",), ("a",), {"min": 0.0})),
        r"^node a \(Clip\): attributes missing \['max'\], unknown \[\]$",
    ),
    "attr-kind": (
        lambda g: _set_node(g, 0, Node("Clip", ("x",), ("a",), {"min": 0.0, "max": 6})),
        r"^node a \(Clip\): attribute max=6 is not of kind float$",
    ),
    "undefined-input": (
        lambda g: _set_node(g, 1, g.nodes[1].with_inputs(["ghost"])),
        r"^node b \(Identity\): input ghost is not defined$",
    ),
    "use-before-def": (
        lambda g: g.nodes.reverse(),
        r"^node c \(Add\): input b is used before it is defined$",
    ),
    "redefined": (
        lambda g: _set_node(g, 1, replace(g.nodes[1], outputs=("a",))),
        r"^node b \(Identity\): output a is already defined$",
    ),
    "output-is-const": (
        lambda g: _set_node(g, 1, replace(g.nodes[1], outputs=("one",))),
        r"^node b \(Identity\): output one is already defined$",
    ),
    "shape": (
        lambda g: g.values.update(b=Value("b", (3, 2), "float32")),
        r"^node b \(Identity\): output b is float32\[3,2\], the rule gives float32\[2,3\]$",
    ),
    "dtype": (
        lambda g: g.values.update(a=Value("a", (2, 3), "float64")),
        r"^node a \(Relu\): output a is float64\[2,3\], the rule gives float32\[2,3\]$",
    ),
    "rule": (
        lambda g: g.values.update(one=Value("one", (4,), "float32", np.ones(4))),
        r"^node c \(Add\): shapes \(2, 3\), \(4,\) do not broadcast$",
    ),
    "dead": (lambda g: g.outputs.__setitem__(0, "b"), r"^node c \(Add\): dead \(no output is used\)$"),
    "unused-const": (
        lambda g: g.values.update(spare=Value("spare", (1,), "float32", np.ones(1))),
        r"^constant spare is not used$",
    ),
    "dangling": (
        lambda g: g.values.update(lost=Value("lost", (1,), "float32")),
        r"^value lost is dangling: not an input, a constant or a node output$",
    ),
    "graph-output": (lambda g: g.outputs.append("nowhere"), r"^graph output nowhere is not defined$"),
    "node-names": (
        lambda g: _set_node(g, 1, replace(g.nodes[1], name="a")),
        r"^node a \(Identity\): another node has this name$",
    ),
    "misfiled": (
        lambda g: g.values.update(b=Value("bb", (2, 3), "float32")),
        r"^value bb is stored under the name b$",
    ),
    "input-const": (
        lambda g: g.values.update(x=Value("x", (2, 3), "float32", np.zeros((2, 3)))),
        r"^graph input x is a constant$",
    ),
    "input-listed-twice": (lambda g: g.inputs.append("x"), r"^a graph input is listed twice$"),
    "input-without-value": (lambda g: g.inputs.append("y"), r"^graph input y has no value$"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_verifier_names_node_and_problem(case: str) -> None:
    fn, match = BROKEN[case]
    with pytest.raises(GraphError, match=match):
        verify(_break(fn))


def test_a_well_formed_graph_passes() -> None:
    g = chain()
    assert verify(g) is g
