"""Making nodes whose output types come from the op table, for the frontend and the passes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compiler.errors import GraphError
from compiler.graph.ir import Graph, Node, Value, type_str
from compiler.graph.opdefs import OPS, TensorType, make_node


def infer(graph: Graph, node: Node) -> list[TensorType]:
    """The output types `node`'s rule gives for its inputs in `graph`; GraphError names the node."""
    try:
        return OPS[node.op].infer([graph.values[i] for i in node.inputs], node.attrs)
    except GraphError as e:
        raise GraphError(f"node {node.name} ({node.op}): {e}") from None


def new_node(
    graph: Graph,
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    attrs: Mapping[str, object] | None = None,
    name: str = "",
) -> Node:
    """A canonical node with its outputs defined in `graph` (not yet placed in `graph.nodes`).

    An output that already has a value (a node being replaced keeps its output name) must keep
    its type: a rewrite never changes what a value is.
    """
    node = make_node(op, inputs, outputs, attrs, name)
    for out, (shape, dtype) in zip(outputs, infer(graph, node), strict=True):
        old = graph.values.get(out)
        if old is None or old.is_const:
            graph.values[out] = Value(out, shape, dtype)
        elif (old.shape, old.dtype) != (shape, dtype):
            raise GraphError(
                f"node {node.name} ({op}): output {out} would change from {old.type_str()} "
                f"to {type_str(shape, dtype)}"
            )
    return node


def append(
    graph: Graph,
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    attrs: Mapping[str, object] | None = None,
    name: str = "",
) -> Node:
    """`new_node`, placed at the end of `graph.nodes`."""
    node = new_node(graph, op, inputs, outputs, attrs, name)
    graph.nodes.append(node)
    return node
