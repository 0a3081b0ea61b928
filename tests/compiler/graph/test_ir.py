"""The graph IR's containers and editing helpers."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import GraphError
from compiler.graph import Graph, Node, Value, const, make_node, print_graph, verify
from compiler.graph.builder import append, new_node


def chain() -> Graph:
    """x -> Relu a -> Identity b -> Add(b, one) c; outputs c."""
    g = Graph()
    g.add_input("x", (2, 3), "float32")
    g.add_const("one", np.ones((3,), np.float32))
    append(g, "Relu", ["x"], ["a"])
    append(g, "Identity", ["a"], ["b"])
    append(g, "Add", ["b", "one"], ["c"])
    g.outputs = ["c"]
    return verify(g)


def test_value_normalises_and_freezes() -> None:
    v = Value("w", [2, 1], np.float32, np.zeros((2, 1)))  # type: ignore[arg-type]
    assert v.shape == (2, 1) and v.dtype == "float32" and v.data is not None and v.data.dtype == np.float32
    assert v.is_const and v.size == 2 and v.rank == 2 and v.type_str() == "float32[2,1]"
    with pytest.raises(ValueError, match="read-only"):
        v.data[0, 0] = 1.0


@pytest.mark.parametrize(
    "args,match",
    [
        (("w", (2,), "float32", np.zeros(3)), r"value w: data shape \(3,\) is not \(2,\)"),
        (("w", (2, -1), "float32"), r"value w: negative dimension in shape \(2, -1\)"),
    ],
)
def test_value_rejects(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(GraphError, match=match):
        Value(*args)  # type: ignore[arg-type]


def test_const_takes_shape_and_dtype_from_data() -> None:
    v = const("s", np.array([1, 2], np.int64))
    assert (v.shape, v.dtype) == ((2,), "int64")


def test_node_attrs_are_canonical_and_immutable() -> None:
    n = Node("Clip", ("x",), ("y",), {"min": 0, "max": np.float64(1 / 6), "flag": True, "axes": [2, 1]})
    assert dict(n.attrs) == {"axes": (2, 1), "flag": 1, "max": float(np.float32(1 / 6)), "min": 0}
    assert n.name == "y"  # the first output names an unnamed node
    with pytest.raises(TypeError):
        n.attrs["min"] = 1  # type: ignore[index]
    with pytest.raises(GraphError, match=r"attribute bad: unsupported value"):
        Node("Relu", ("x",), ("y",), {"bad": object()})


def test_make_node_fills_defaults_and_coerces() -> None:
    n = make_node("Gemm", ["a", "b"], ["y"], {"alpha": 2})
    assert dict(n.attrs) == {"alpha": 2.0, "beta": 1.0, "transA": 0, "transB": 0}
    assert isinstance(n.attrs["alpha"], float)
    with pytest.raises(GraphError, match="Gemm has no attribute gamma"):
        make_node("Gemm", ["a", "b"], ["y"], {"gamma": 1})
    with pytest.raises(GraphError, match="Reshape needs attribute shape"):
        make_node("Reshape", ["a"], ["y"])


def test_producer_and_consumers() -> None:
    g = chain()
    assert g.producer("b") is g.nodes[1] and g.producer("x") is None and g.producer("one") is None
    assert g.consumers("a") == [g.nodes[1]]
    assert g.consumer_map()["b"] == [g.nodes[2]]
    assert g.const_data("one") is not None and g.const_data("x") is None


def test_replace_uses_and_fresh_names() -> None:
    g = chain()
    g.replace_uses("b", "a")
    assert g.nodes[2].inputs == ("a", "one")
    assert g.fresh_name("a") == "a.1" and g.fresh_name("new") == "new"
    assert g.add_const("one", np.zeros(1, np.float32)) == "one.1"


def test_bypass_inside_the_graph() -> None:
    g = chain()
    assert g.bypass(g.nodes[1], "a")
    g.remove_dead()
    assert [n.op for n in verify(g).nodes] == ["Relu", "Add"] and g.nodes[1].inputs == ("a", "one")


def test_bypass_keeps_the_graph_output_name() -> None:
    g = chain()
    g.outputs = ["b"]
    g.remove_dead()
    assert g.bypass(g.nodes[1], "a")
    verify(g)
    assert g.outputs == ["b"] and g.nodes[0].outputs == ("b",) and "a" not in g.values


def test_bypass_refuses_when_the_output_is_a_graph_input() -> None:
    g = Graph()
    g.add_input("x", (2,), "float32")
    append(g, "Identity", ["x"], ["y"])
    g.outputs = ["y"]
    assert not g.bypass(g.nodes[0], "x")
    assert len(verify(g).nodes) == 1


def test_remove_dead_drops_nodes_and_unused_constants() -> None:
    g = chain()
    g.add_const("unused", np.zeros(2, np.float32))
    append(g, "Relu", ["x"], ["dead"])
    g.remove_dead()
    assert "unused" not in g.values and "dead" not in g.values and len(g.nodes) == 3
    verify(g)


def test_toposort_restores_order_and_detects_cycles() -> None:
    g = chain()
    g.nodes.reverse()
    assert [n.outputs[0] for n in g.toposort().nodes] == ["a", "b", "c"]
    g.nodes[0] = g.nodes[0].with_inputs(["c"])  # a = Relu(c): a cycle
    with pytest.raises(GraphError, match="its inputs form a cycle"):
        g.toposort()
    g.nodes[0] = g.nodes[0].with_inputs(["ghost"])
    with pytest.raises(GraphError, match="node a \\(Relu\\): input ghost is never defined"):
        g.toposort()


def test_copy_is_independent() -> None:
    g = chain()
    h = g.copy()
    h.nodes.pop()
    h.outputs = ["b"]
    h.values.pop("c")
    assert len(g.nodes) == 3 and g.outputs == ["c"] and "c" in g.values
    assert print_graph(verify(g)) == print_graph(chain())


def test_new_node_must_keep_an_output_type() -> None:
    g = chain()
    with pytest.raises(GraphError, match=r"output b would change from float32\[2,3\] to float32\[2,1,3\]"):
        new_node(g, "Unsqueeze", ["a"], ["b"], {"axes": (1,)})


def test_add_value_twice() -> None:
    g = chain()
    with pytest.raises(GraphError, match="value a is defined twice"):
        g.add_value(Value("a", (1,), "float32"))
