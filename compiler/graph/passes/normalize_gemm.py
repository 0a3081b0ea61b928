"""Dense layers in one form: `Gemm(A, W, b)` with W constant in the accelerator's [N, K] layout
(transB=1), transA=0, alpha=beta=1 folded into W and b, and b a constant [N] vector (zeros when
the model has none). A 2-D MatMul by a constant matrix, with the constant per-column Add that
TensorFlow-style exporters write after it, becomes that Gemm too.

A Gemm whose B is not constant is left as it is."""

from __future__ import annotations

import numpy as np

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import rewrite, set_const_input, sole_user, split_const

CANONICAL = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1}


def normalize_gemm(graph: Graph) -> Graph:
    return rewrite(graph, _gemm, _matmul)


def column_bias(c: np.ndarray, m: int, n: int) -> np.ndarray | None:
    """A bias broadcastable to [M, N] as the [N] vector it amounts to, or None if rows differ."""
    if c.ndim == 2 and c.shape[0] != 1 and m != 1:
        return None
    return np.broadcast_to(c, (m, n))[0].copy()


def _gemm(graph: Graph, node: Node) -> bool:
    if node.op != "Gemm":
        return False
    b = graph.const_data(node.inputs[1])
    if b is None or _canonical(graph, node):
        return False
    a = node.inputs[0]
    weight = (b if node.int_attr("transB") else b.T) * np.float32(node.float_attr("alpha"))
    n = weight.shape[0]
    m = graph.values[node.outputs[0]].shape[0]
    bias = _bias(graph, node, m, n)
    if bias is None:
        return False  # a full [M, N] constant addend: keep this rare form as it is
    if node.int_attr("transA"):
        a = _transpose(graph, node, a)
    inputs = [
        a,
        set_const_input(graph, node, 1, weight.astype(b.dtype), f"{node.name}.weight"),
        set_const_input(graph, node, 2, bias, f"{node.name}.bias"),
    ]
    graph.replace_node(node, [new_node(graph, "Gemm", inputs, node.outputs, CANONICAL, node.name)])
    return True


def _canonical(graph: Graph, node: Node) -> bool:
    if dict(node.attrs) != CANONICAL or len(node.inputs) != 3:
        return False
    c = graph.values[node.inputs[2]]
    return c.shape == (graph.values[node.outputs[0]].shape[1],) or not c.is_const


def _bias(graph: Graph, node: Node, m: int, n: int) -> np.ndarray | None:
    dtype = graph.values[node.outputs[0]].dtype
    if len(node.inputs) < 3:
        return np.zeros(n, dtype)
    c = graph.const_data(node.inputs[2])
    if c is None:
        return None
    vector = column_bias(c, m, n)
    return None if vector is None else (vector * np.float32(node.float_attr("beta"))).astype(dtype)


def _transpose(graph: Graph, node: Node, a: str) -> str:
    out = graph.fresh_name(f"{a}/T")
    graph.replace_node(node, [new_node(graph, "Transpose", [a], [out], {"perm": (1, 0)}), node])
    return out


def _matmul(graph: Graph, node: Node) -> bool:
    """MatMul(A [M, K], W [K, N] constant) (+ constant per-column Add) -> Gemm."""
    if node.op != "MatMul" or graph.values[node.inputs[0]].rank != 2:
        return False
    w = graph.const_data(node.inputs[1])
    if w is None or w.ndim != 2 or w.dtype.kind != "f":
        return False
    m, n = graph.values[node.outputs[0]].shape
    add, bias = _absorbed_add(graph, node.outputs[0], m, n)
    out = add.outputs[0] if add is not None else node.outputs[0]
    if add is not None and bias is not None:  # the Add's bias keeps its name when only it reads it
        index = add.inputs.index(_const_input(graph, add))
        bias_name = set_const_input(graph, add, index, bias.astype(w.dtype), f"{node.name}.bias")
    else:
        bias_name = graph.add_const(f"{node.name}.bias", np.zeros(n, w.dtype))
    weight = set_const_input(graph, node, 1, np.ascontiguousarray(w.T), f"{node.name}.weight")
    inputs = [node.inputs[0], weight, bias_name]
    gemm = new_node(graph, "Gemm", inputs, [out], CANONICAL, node.name)
    graph.replace_node(node, [gemm])
    if add is not None:
        graph.nodes.remove(add)
    return True


def _const_input(graph: Graph, node: Node) -> str:
    return next(i for i in node.inputs if graph.const_data(i) is not None)


def _absorbed_add(graph: Graph, out: str, m: int, n: int) -> tuple[Node | None, np.ndarray | None]:
    """The Add that only adds a per-column constant to `out` (MatMul's result), with that bias."""
    add = sole_user(graph, out)
    split = split_const(graph, add) if add is not None and add.op == "Add" else None
    if add is None or split is None or split[0] != out or graph.values[add.outputs[0]].shape != (m, n):
        return None, None
    bias = column_bias(split[1], m, n)
    return (add, bias) if bias is not None else (None, None)
