"""The Erf GELU pattern to one Gelu node."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.graph.passes import fuse_gelu
from tests.compiler.graph.passes.graphs import NodeSpec, check_pass, make

CONSTS = {
    "sqrt2": np.array(math.sqrt(2), np.float32),
    "rsqrt2": np.array(1 / math.sqrt(2), np.float32),
    "one": np.array(1.0, np.float32),
    "half": np.array(0.5, np.float32),
    "two": np.array(2.0, np.float32),
}
ERF_DIV = [("Div", ["x", "sqrt2"], "s", {}), ("Erf", ["s"], "e", {}), ("Add", ["e", "one"], "p", {})]
ERF_MUL = [("Mul", ["rsqrt2", "x"], "s", {}), ("Erf", ["s"], "e", {}), ("Add", ["one", "e"], "p", {})]
GELU: dict[str, list[NodeSpec]] = {
    "x-then-half": [*ERF_DIV, ("Mul", ["x", "p"], "m", {}), ("Mul", ["m", "half"], "y", {})],
    "half-then-x": [*ERF_MUL, ("Mul", ["p", "half"], "m", {}), ("Mul", ["x", "m"], "y", {})],
    "half-x-first": [*ERF_DIV, ("Mul", ["half", "x"], "h", {}), ("Mul", ["h", "p"], "y", {})],
}


def _graph(nodes: list[NodeSpec]) -> object:
    used = {i for _, ins, _, _ in nodes for i in ins}
    return make({"x": (3, 4)}, {k: v for k, v in CONSTS.items() if k in used}, nodes, ["y"])


@pytest.mark.parametrize("case", sorted(GELU))
def test_gelu(case: str) -> None:
    check_pass(
        fuse_gelu,
        _graph(GELU[case]),
        """\
graph main(x: float32[3,4]) -> (y)
  y: float32[3,4] = Gelu(x) approximate='none'""",
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "nodes",
    [
        [
            ("Div", ["x", "two"], "s", {}),
            ("Erf", ["s"], "e", {}),
            ("Add", ["e", "one"], "p", {}),
            ("Mul", ["x", "p"], "m", {}),
            ("Mul", ["m", "half"], "y", {}),
        ],
        [*ERF_DIV, ("Mul", ["x", "p"], "m", {}), ("Mul", ["m", "two"], "y", {})],
        [
            ("Div", ["sqrt2", "x"], "s", {}),
            ("Erf", ["s"], "e", {}),
            ("Add", ["e", "one"], "p", {}),
            ("Mul", ["x", "p"], "m", {}),
            ("Mul", ["m", "half"], "y", {}),
        ],
        [*ERF_DIV, ("Mul", ["p", "p"], "m", {}), ("Mul", ["m", "half"], "y", {})],
    ],
    ids=["divided-by-two", "times-two", "sqrt2-over-x", "squared"],
)
def test_near_misses_stay(nodes: list[NodeSpec]) -> None:
    g = _graph(nodes)
    assert [n.op for n in fuse_gelu(g).nodes] == [n[0] for n in nodes]  # type: ignore[attr-defined]
