"""Bounded activations in one form, whatever spelling the exporter chose:

- Max(x, c) and Min(x, c) with a one-element float constant c -> Clip(min=c) / Clip(max=c);
- Clip(Clip(x)) and Clip(Relu(x)) with overlapping ranges -> one Clip (so TensorFlow's
  Min(Max(x, 0), 6) becomes the Clip(0, 6) PyTorch writes for ReLU6);
- Clip(min=0, max=inf) -> Relu.
"""

from __future__ import annotations

import math

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import produced_by, rewrite, sole_user, split_const


def canonicalize_clips(graph: Graph) -> Graph:
    return rewrite(graph, _min_max_to_clip, _merge_clips, _clip_to_relu)


def _min_max_to_clip(graph: Graph, node: Node) -> bool:
    if node.op not in ("Max", "Min") or len(node.inputs) != 2:
        return False
    split = split_const(graph, node)
    if split is None or split[1].size != 1 or split[1].dtype.kind != "f":
        return False
    x, c = split
    if graph.values[x].shape != graph.values[node.outputs[0]].shape:
        return False  # the constant broadcasts x to a larger shape: not an element-wise bound
    bound = {"min": float(c.reshape(-1)[0])} if node.op == "Max" else {"max": float(c.reshape(-1)[0])}
    graph.replace_node(node, [new_node(graph, "Clip", [x], node.outputs, bound, node.name)])
    return True


def _range(node: Node) -> tuple[float, float]:
    if node.op == "Relu":
        return 0.0, math.inf
    return node.float_attr("min"), node.float_attr("max")


def _merge_clips(graph: Graph, node: Node) -> bool:
    if node.op != "Clip":
        return False
    inner = produced_by(graph, node.inputs[0], "Clip", "Relu")
    if inner is None or sole_user(graph, inner.outputs[0]) is not node:
        return False
    (lo_in, hi_in), (lo, hi) = _range(inner), _range(node)
    merged = max(lo_in, lo), min(hi_in, hi)
    if merged[0] > merged[1] or graph.values[node.inputs[0]].dtype.startswith("int"):
        return False  # disjoint ranges give a constant; integer Relu stays Relu
    attrs = {"min": merged[0], "max": merged[1]}
    graph.replace_node(node, [new_node(graph, "Clip", inner.inputs, node.outputs, attrs, node.name)])
    return True


def _clip_to_relu(graph: Graph, node: Node) -> bool:
    if node.op != "Clip" or _range(node) != (0.0, math.inf):
        return False
    graph.replace_node(node, [new_node(graph, "Relu", node.inputs, node.outputs, name=node.name)])
    return True
