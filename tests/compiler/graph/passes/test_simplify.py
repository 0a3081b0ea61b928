"""The simplify pipeline: passes to a fixed point, verified after each."""

from __future__ import annotations

import numpy as np

from compiler.graph import Graph, print_graph, verify
from compiler.graph.passes import MAX_ROUNDS, simplify
from tests.compiler.graph.passes.graphs import make


def test_fixed_point_and_idempotent() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, 1, 1)).astype(np.float32)
    g = make(
        {"x": (1, 3, 2, 2)},
        {
            "w": w,
            "s": np.full((4, 1, 1), 2.0, np.float32),
            "three": np.array(3.0, np.float32),
            "six": np.array(6.0, np.float32),
        },
        [
            ("Identity", ["x"], "i", {}),
            ("Conv", ["i", "w"], "c", {"strides": (1, 1), "pads": (0,) * 4, "dilations": (1, 1)}),
            ("Mul", ["c", "s"], "m", {}),
            ("Add", ["m", "three"], "p", {}),
            ("Clip", ["p"], "r", {"min": 0.0, "max": 6.0}),
            ("Div", ["r", "six"], "h", {}),
            ("Mul", ["m", "h"], "y", {}),
        ],
        ["y"],
    )
    once = simplify(g, check=True)
    assert (
        print_graph(once)
        == """\
graph main(x: float32[1,3,2,2]) -> (y)
  const w: float32[4,3,1,1]
  const c.bias: float32[4] = [0.0, 0.0, 0.0, 0.0]
  m: float32[1,4,2,2] = Conv(x, w, c.bias) dilations=[1,1] group=1 pads=[0,0,0,0] strides=[1,1]
  y: float32[1,4,2,2] = HardSwish(m)"""
    )
    np.testing.assert_array_equal(once.values["w"].data, 2 * w)
    assert print_graph(simplify(once)) == print_graph(once)


def test_stops_after_max_rounds() -> None:
    calls = []

    def flip(g: Graph) -> Graph:  # a pass that never settles: renames the graph each time
        calls.append(1)
        h = g.copy()
        h.name = "a" if g.name == "b" else "b"
        return verify(h)

    simplify(make({"x": (1,)}, {}, [("Relu", ["x"], "y", {})], ["y"]), passes=[flip])
    assert len(calls) == MAX_ROUNDS
