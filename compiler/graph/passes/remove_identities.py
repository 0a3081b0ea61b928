"""Removal of nodes that do nothing: Identity and (inference) Dropout as converters write them,
and ops whose parameters make them no-ops (a Cast to the same dtype, a Reshape or Flatten to
the same shape, an identity Transpose, zero Pad, a Slice or Expand that keeps everything, a
one-input Concat/Sum/Max/Min). Graph output names are kept (see `Graph.bypass`)."""

from __future__ import annotations

from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import rewrite

_ALWAYS = ("Identity", "Dropout")
_SHAPE_KEEPING = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Slice")
_VARIADIC = ("Concat", "Sum", "Max", "Min")


def remove_identities(graph: Graph) -> Graph:
    return rewrite(graph, _drop_noop)


def _drop_noop(graph: Graph, node: Node) -> bool:
    if not _is_noop(graph, node):
        return False
    return graph.bypass(node, node.inputs[0])


def _is_noop(graph: Graph, node: Node) -> bool:
    if node.op in _ALWAYS:
        return True
    if node.op in _VARIADIC:
        return len(node.inputs) == 1
    x, y = graph.values[node.inputs[0]], graph.values[node.outputs[0]]
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if node.op in _SHAPE_KEEPING:
        # same shape: a Slice took every element in order (steps 1), the others copy
        return node.op != "Slice" or all(s == 1 for s in node.ints_attr("steps"))
    if node.op == "Cast":
        return True
    if node.op == "Transpose":
        return list(node.ints_attr("perm")) == sorted(node.ints_attr("perm"))
    if node.op == "Pad":
        return not any(node.ints_attr("pads"))
    return False
