"""Reshapes in one form, so exporters' different spellings of "flatten before the classifier"
become the same graph:

- a chain of Reshape / Flatten / Squeeze / Unsqueeze becomes one Reshape, a chain of
  Transposes one Transpose (an identity one then goes with `remove_identities`);
- a Reshape, Squeeze or Flatten feeding a Gemm whose result equals Flatten(axis=k) of its input
  becomes Flatten(axis=k) (k = 1 preferred);
- ReduceMean / ReduceMax over all spatial axes of an image (NC + two or more spatial axes; not
  a sequence's last axis) becomes GlobalAveragePool / GlobalMaxPool, followed by
  Flatten(axis=1) when keepdims=0.
"""

from __future__ import annotations

import math

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import produced_by, rewrite, sole_user

RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")
_GLOBAL = {"ReduceMean": "GlobalAveragePool", "ReduceMax": "GlobalMaxPool"}


def canonicalize_reshapes(graph: Graph) -> Graph:
    return rewrite(graph, _merge_chain, _merge_transposes, _flatten_before_gemm, _global_pool)


def _merge_chain(graph: Graph, node: Node) -> bool:
    if node.op not in RESHAPES:
        return False
    inner = produced_by(graph, node.inputs[0], *RESHAPES)
    if inner is None or sole_user(graph, inner.outputs[0]) is not node:
        return False
    shape = graph.values[node.outputs[0]].shape
    graph.replace_node(
        node, [new_node(graph, "Reshape", inner.inputs, node.outputs, {"shape": shape}, node.name)]
    )
    return True


def _merge_transposes(graph: Graph, node: Node) -> bool:
    inner = produced_by(graph, node.inputs[0], "Transpose") if node.op == "Transpose" else None
    if inner is None or sole_user(graph, inner.outputs[0]) is not node:
        return False
    first, second = inner.ints_attr("perm"), node.ints_attr("perm")
    perm = tuple(first[p] for p in second)  # output axis i is inner's axis second[i]
    graph.replace_node(
        node, [new_node(graph, "Transpose", inner.inputs, node.outputs, {"perm": perm}, node.name)]
    )
    return True


def flatten_axis(src: tuple[int, ...], dst: tuple[int, ...]) -> int | None:
    """The axis k with Flatten(k) of shape `src` equal to `dst` (1 preferred), or None."""
    if len(dst) != 2:
        return None
    axes = [k for k in range(len(src) + 1) if (math.prod(src[:k]), math.prod(src[k:])) == dst]
    return 1 if 1 in axes else (axes[0] if axes else None)


def _flatten_before_gemm(graph: Graph, node: Node) -> bool:
    if node.op not in ("Reshape", "Squeeze", "Flatten"):
        return False
    if not any(u.op == "Gemm" and u.inputs[0] == node.outputs[0] for u in graph.consumers(node.outputs[0])):
        return False
    src, dst = graph.values[node.inputs[0]].shape, graph.values[node.outputs[0]].shape
    axis = flatten_axis(src, dst)
    if axis is None or (node.op == "Flatten" and node.attrs["axis"] == axis):
        return False
    graph.replace_node(
        node, [new_node(graph, "Flatten", node.inputs, node.outputs, {"axis": axis}, node.name)]
    )
    return True


def _global_pool(graph: Graph, node: Node) -> bool:
    if node.op not in _GLOBAL:
        return False
    x = graph.values[node.inputs[0]]
    if x.rank < 4 or node.ints_attr("axes") != tuple(range(2, x.rank)):
        return False
    if node.int_attr("keepdims"):
        graph.replace_node(node, [new_node(graph, _GLOBAL[node.op], [x.name], node.outputs, name=node.name)])
        return True
    pooled = graph.fresh_name(f"{node.outputs[0]}/pooled")
    pool = new_node(graph, _GLOBAL[node.op], [x.name], [pooled], name=pooled)
    flat = new_node(graph, "Flatten", [pooled], node.outputs, {"axis": 1}, node.name)
    graph.replace_node(node, [pool, flat])
    return True
