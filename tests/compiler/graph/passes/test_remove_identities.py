"""Removal of Identity, Dropout and no-op nodes."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.passes import remove_identities
from tests.compiler.graph.passes.graphs import check_pass, make


def test_identity_and_dropout() -> None:
    g = make(
        {"x": (2, 3)},
        {},
        [
            ("Identity", ["x"], "a", {}),
            ("Relu", ["a"], "b", {}),
            ("Dropout", ["b"], "c", {}),
            ("Identity", ["c"], "d", {}),
            ("Sigmoid", ["d"], "y", {}),
        ],
        ["y"],
    )
    check_pass(
        remove_identities,
        g,
        """\
graph main(x: float32[2,3]) -> (y)
  b: float32[2,3] = Relu(x)
  y: float32[2,3] = Sigmoid(b)""",
    )


def test_a_graph_output_keeps_its_name() -> None:
    g = make(
        {"x": (2, 3)},
        {},
        [("Relu", ["x"], "r", {}), ("Dropout", ["r"], "d", {}), ("Identity", ["d"], "y", {})],
        ["y"],
    )
    check_pass(
        remove_identities,
        g,
        """\
graph main(x: float32[2,3]) -> (y)
  y: float32[2,3] = Relu(x)""",
    )


def test_identity_from_input_to_output_stays() -> None:
    g = make({"x": (2,)}, {}, [("Identity", ["x"], "y", {})], ["y"])
    check_pass(
        remove_identities,
        g,
        """\
graph main(x: float32[2]) -> (y)
  y: float32[2] = Identity(x)""",
    )


NOOPS = {
    "cast": ("Cast", {"to": "float32"}),
    "reshape": ("Reshape", {"shape": (3, 3)}),
    "transpose": ("Transpose", {"perm": (0, 1)}),
    "pad": ("Pad", {"pads": (0, 0, 0, 0)}),
    "slice": ("Slice", {"starts": (0,), "ends": (3,), "axes": (1,), "steps": (1,)}),
    "concat": ("Concat", {"axis": 0}),
    "expand": ("Expand", {"shape": (3, 1)}),
}
KEPT = {  # same shape, different values: these must stay
    "transpose": ("Transpose", {"perm": (1, 0)}),
    "reverse": ("Slice", {"starts": (2,), "ends": (-1,), "axes": (1,), "steps": (-1,)}),
    "pad-crop": ("Pad", {"pads": (1, 0, -1, 0), "mode": "constant"}),
}


@pytest.mark.parametrize("case", sorted(NOOPS))
def test_noops_go(case: str) -> None:
    op, attrs = NOOPS[case]
    g = make({"x": (3, 3)}, {}, [(op, ["x"], "a", attrs), ("Relu", ["a"], "y", {})], ["y"])
    check_pass(
        remove_identities,
        g,
        """\
graph main(x: float32[3,3]) -> (y)
  y: float32[3,3] = Relu(x)""",
    )


@pytest.mark.parametrize("case", sorted(KEPT))
def test_same_shape_is_not_enough(case: str) -> None:
    op, attrs = KEPT[case]
    g = make({"x": (3, 3)}, {}, [(op, ["x"], "a", attrs), ("Relu", ["a"], "y", {})], ["y"])
    assert [n.op for n in remove_identities(g).nodes] == [op, "Relu"]


def test_sum_of_two_same_shaped_inputs_stays() -> None:
    g = make({"x": (3,)}, {"w": np.ones(3, np.float32)}, [("Sum", ["x", "w"], "y", {})], ["y"])
    assert [n.op for n in remove_identities(g).nodes] == ["Sum"]
