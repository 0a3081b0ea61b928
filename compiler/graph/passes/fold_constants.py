"""Constant folding: every node whose inputs are all constant (or, for Shape and Size, whose
input's shape is known, which is always) is evaluated with the reference interpreter and its
outputs become constants. This removes Constant/ConstantOfShape-made weights, weight
transposes and casts, and the Shape -> Gather -> Concat chains converters write around
reshapes. Quantize/dequantize nodes are kept: they carry a QDQ model's scales."""

from __future__ import annotations

import numpy as np

from compiler.graph.interp import evaluate_node
from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs import OPS


def fold_constants(graph: Graph) -> Graph:
    g = graph.copy()
    kept: list[Node] = []
    for node in g.nodes:
        arrays = _constant_inputs(g, node)
        if arrays is None:
            kept.append(node)
            continue
        for name, data in zip(node.outputs, evaluate_node(g, node, arrays), strict=True):
            g.values[name] = const(name, data)
    g.nodes = kept
    return g.remove_dead()


def _constant_inputs(graph: Graph, node: Node) -> list[np.ndarray] | None:
    """The input arrays to fold `node` with, or None if it must stay."""
    opdef = OPS[node.op]
    if not opdef.foldable:
        return None
    if opdef.shape_only:
        v = graph.values[node.inputs[0]]
        return [np.broadcast_to(np.zeros((), v.dtype), v.shape)]  # the shape without the data
    arrays = []
    for name in node.inputs:
        data = graph.const_data(name)
        if data is None:
            return None
        arrays.append(data)
    return arrays
