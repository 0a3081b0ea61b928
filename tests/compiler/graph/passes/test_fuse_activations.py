"""HardSigmoid / HardSwish patterns to one op each."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.passes import fuse_activations
from tests.compiler.graph.passes.graphs import NodeSpec, check_pass, make

CONSTS = {
    "three": np.array(3.0, np.float32),
    "six": np.array([6.0], np.float32),
    "sixth": np.array(1 / 6, np.float32),
}
RELU6 = [("Add", ["three", "x"], "p", {}), ("Clip", ["p"], "r", {"min": 0.0, "max": 6.0})]

HARD_SIGMOID: dict[str, list[NodeSpec]] = {
    "div": [*RELU6, ("Div", ["r", "six"], "y", {})],
    "mul": [*RELU6, ("Mul", ["sixth", "r"], "y", {})],
}
HARD_SWISH: dict[str, list[NodeSpec]] = {
    "mul-then-div": [*RELU6, ("Mul", ["x", "r"], "m", {}), ("Div", ["m", "six"], "y", {})],
    "mul-then-mul": [*RELU6, ("Mul", ["r", "x"], "m", {}), ("Mul", ["m", "sixth"], "y", {})],
    "hardsigmoid-mul": [
        ("HardSigmoid", ["x"], "h", {"alpha": 1 / 6, "beta": 0.5}),
        ("Mul", ["h", "x"], "y", {}),
    ],
    "div-then-mul": [*RELU6, ("Div", ["r", "six"], "h", {}), ("Mul", ["x", "h"], "y", {})],
}


def _graph(nodes: list[NodeSpec]) -> object:
    used = {i for _, ins, _, _ in nodes for i in ins}
    return make({"x": (2, 5)}, {k: v for k, v in CONSTS.items() if k in used}, nodes, ["y"])


@pytest.mark.parametrize("case", sorted(HARD_SIGMOID))
def test_hard_sigmoid(case: str) -> None:
    check_pass(
        fuse_activations,
        _graph(HARD_SIGMOID[case]),
        """\
graph main(x: float32[2,5]) -> (y)
  y: float32[2,5] = HardSigmoid(x) alpha=0.16666667 beta=0.5""",
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("case", sorted(HARD_SWISH))
def test_hard_swish(case: str) -> None:
    check_pass(
        fuse_activations,
        _graph(HARD_SWISH[case]),
        """\
graph main(x: float32[2,5]) -> (y)
  y: float32[2,5] = HardSwish(x)""",
    )  # type: ignore[arg-type]


NOT_PATTERNS: dict[str, list[NodeSpec]] = {
    "divided-by-five": [*RELU6, ("Div", ["r", "five"], "y", {})],
    "clip-to-four": [
        ("Add", ["three", "x"], "p", {}),
        ("Clip", ["p"], "r", {"min": 0.0, "max": 4.0}),
        ("Div", ["r", "six"], "y", {}),
    ],
    "sum-read-twice": [*RELU6, ("Div", ["r", "six"], "d", {}), ("Add", ["d", "p"], "y", {})],
    "other-multiplicand": [
        ("HardSigmoid", ["x"], "h", {"alpha": 1 / 6, "beta": 0.5}),
        ("Mul", ["h", "z"], "y", {}),
    ],
    "default-hardsigmoid": [("HardSigmoid", ["x"], "h", {}), ("Mul", ["h", "x"], "y", {})],
}


@pytest.mark.parametrize("case", sorted(NOT_PATTERNS))
def test_near_misses_stay(case: str) -> None:
    nodes = NOT_PATTERNS[case]
    used = {i for _, ins, _, _ in nodes for i in ins}
    consts = {**CONSTS, "five": np.array(5.0, np.float32)}
    g = make({"x": (2, 5), "z": (2, 5)}, {k: v for k, v in consts.items() if k in used}, nodes, ["y"])
    assert [n.op for n in fuse_activations(g).nodes] == [n[0] for n in nodes]
