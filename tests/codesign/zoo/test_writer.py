import numpy as np
import pytest

from codesign.zoo import ops
from codesign.zoo.writer import GraphWriter


def test_a_name_used_twice_is_refused():
    g = GraphWriter("t", 20)
    x = g.input("x", np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="graph t: value name 'x' is used twice"):
        ops.relu(g, x, name="x")


def test_an_output_that_feeds_another_node_is_refused():
    g = GraphWriter("t", 20)
    y = ops.relu(g, g.input("x", np.zeros((1, 2), np.float32)), name="r")
    ops.relu(g, y, name="r2")
    with pytest.raises(ValueError, match="graph t: output 'r' also feeds 'r2'"):
        g.output(y, "logits")


def test_equal_constants_are_shared_and_outputs_renamed():
    g = GraphWriter("t", 13)
    x = g.input("x", np.ones((1, 2), np.float32))
    a = ops.add(g, x, g.constant(np.float32(2.0)), name="a")
    b = ops.add(g, a, g.constant(2.0), name="b")  # float64 scalars become float32: the same constant
    assert g.output(b, "out").name == "out"
    m = g.to_model(doc="d", metadata={"k": "v"})
    assert len(m.graph.initializer) == 1 and [n.output[0] for n in m.graph.node] == ["a", "out"]
    assert m.ir_version == 7 and m.producer_name == "codesign.zoo" and m.metadata_props[0].key == "k"
