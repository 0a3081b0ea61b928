"""Max/Min/Relu/Clip spellings of bounded activations to one Clip (or Relu)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.passes import canonicalize_clips
from tests.compiler.graph.passes.graphs import NodeSpec, check_pass, make

CONSTS = {
    "zero": np.array(0.0, np.float32),
    "six": np.array([6.0], np.float32),
    "two": np.array(2.0, np.float32),
}


def _graph(nodes: list[NodeSpec], consts: dict[str, np.ndarray] = CONSTS) -> object:
    used = {i for _, ins, _, _ in nodes for i in ins}
    return make({"x": (2, 5)}, {k: v for k, v in consts.items() if k in used}, nodes, ["y"])


RELU6 = """\
graph main(x: float32[2,5]) -> (y)
  y: float32[2,5] = Clip(x) max=6.0 min=0.0"""


@pytest.mark.parametrize(
    "nodes",
    [
        [("Max", ["x", "zero"], "m", {}), ("Min", ["six", "m"], "y", {})],
        [("Min", ["x", "six"], "m", {}), ("Max", ["m", "zero"], "y", {})],
        [("Relu", ["x"], "m", {}), ("Clip", ["m"], "y", {"max": 6.0})],
        [("Clip", ["x"], "m", {"min": -1.0, "max": 6.0}), ("Clip", ["m"], "y", {"min": 0.0, "max": 9.0})],
    ],
    ids=["max-then-min", "min-then-max", "relu-then-clip", "clip-clip"],
)
def test_relu6_spellings(nodes: list[NodeSpec]) -> None:
    check_pass(canonicalize_clips, _graph(nodes), RELU6)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "nodes",
    [[("Max", ["zero", "x"], "y", {})], [("Clip", ["x"], "y", {"min": 0.0})]],
    ids=["max-zero", "clip-min-zero"],
)
def test_relu_spellings(nodes: list[NodeSpec]) -> None:
    check_pass(
        canonicalize_clips,
        _graph(nodes),
        """\
graph main(x: float32[2,5]) -> (y)
  y: float32[2,5] = Relu(x)""",
    )  # type: ignore[arg-type]


def test_forms_that_stay() -> None:
    consts = {"row": np.ones(5, np.float32), "wide": np.zeros((3, 2, 5), np.float32)}
    nodes: list[NodeSpec] = [
        ("Max", ["x", "row"], "a", {}),  # a per-element bound, not a scalar
        ("Max", ["x", "wide"], "b", {}),  # broadcasts x up to [3, 2, 5]
        ("Clip", ["x"], "c", {"min": 3.0, "max": 4.0}),
        ("Clip", ["c"], "d", {"min": 5.0, "max": 6.0}),  # disjoint with the inner range
        ("Sum", ["a", "b", "d"], "y", {}),
    ]
    g = make({"x": (2, 5)}, consts, nodes, ["y"])
    assert [n.op for n in canonicalize_clips(g).nodes] == ["Max", "Max", "Clip", "Clip", "Sum"]
