"""Batch-norm folding.

An inference BatchNormalization is a per-channel affine map y = x * s + t with
s = scale / sqrt(var + eps) and t = bias - mean * s. After a Conv or canonical Gemm whose output
nothing else reads, it folds into the weights (W * s per output channel) and bias (b * s + t).
Anywhere else it becomes Mul(x, s) then Add(., t) with [C, 1, ...] constants. A Mul or Add by a
per-channel constant directly after a Conv/Gemm (how TensorFlow and Paddle exporters write an
unfolded batch norm) folds the same way.
"""

from __future__ import annotations

import numpy as np

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import produced_by, rewrite, set_const_input, sole_user, split_const
from compiler.graph.passes.normalize_gemm import CANONICAL


def fold_batchnorm(graph: Graph) -> Graph:
    return rewrite(graph, _batchnorm, _affine)


def bn_affine(params: list[np.ndarray], epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) with BN(x) = x * s + t per channel, computed in float64."""
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    s = scale / np.sqrt(var + epsilon)
    return s, bias - mean * s


def _batchnorm(graph: Graph, node: Node) -> bool:
    if node.op != "BatchNormalization":
        return False
    params = [p for p in (graph.const_data(i) for i in node.inputs[1:]) if p is not None]
    if len(params) != 4:
        return False
    s, t = bn_affine(params, node.float_attr("epsilon"))
    if _fold_into_producer(graph, node, s, t):
        return True
    _to_mul_add(graph, node, s, t)
    return True


def _to_mul_add(graph: Graph, node: Node, s: np.ndarray, t: np.ndarray) -> None:
    x = graph.values[node.inputs[0]]
    shape = (-1,) + (1,) * (x.rank - 2)
    scale = graph.add_const(f"{node.name}.scale", s.reshape(shape).astype(x.dtype))
    shift = graph.add_const(f"{node.name}.shift", t.reshape(shape).astype(x.dtype))
    scaled = graph.fresh_name(f"{node.outputs[0]}/scaled")
    mul = new_node(graph, "Mul", [x.name, scale], [scaled])
    add = new_node(graph, "Add", [scaled, shift], node.outputs, name=node.name)
    graph.replace_node(node, [mul, add])


def _affine(graph: Graph, node: Node) -> bool:
    """Mul or Add of a Conv/Gemm output by a per-channel constant."""
    if node.op not in ("Mul", "Add"):
        return False
    split = split_const(graph, node)
    if split is None:
        return False
    x, c = split
    vector = per_channel(c, graph.values[x].shape)
    if vector is None:
        return False
    ones, zeros = np.ones_like(vector), np.zeros_like(vector)
    s, t = (vector, zeros) if node.op == "Mul" else (ones, vector)
    return _fold_into_producer(graph, node, s, t)


def per_channel(c: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A constant that broadcasts against `shape` along axis 1 only, as a float64 vector."""
    if c.dtype.kind != "f" or len(shape) < 2 or c.ndim > len(shape):
        return None
    full = (1,) * (len(shape) - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, shape[1]):
        return None
    return np.broadcast_to(c.reshape(-1).astype(np.float64), (shape[1],)).copy()


def _fold_into_producer(graph: Graph, node: Node, s: np.ndarray, t: np.ndarray) -> bool:
    """Fold y = x * s + t (per channel of axis 1) into x's Conv/Gemm producer, if possible."""
    x = (
        node.inputs[0]
        if node.op == "BatchNormalization"
        else next(i for i in node.inputs if graph.const_data(i) is None)
    )
    prod = produced_by(graph, x, "Conv", "Gemm")
    if prod is None or sole_user(graph, x) is not node:
        return False
    w = graph.const_data(prod.inputs[1])
    if w is None or (prod.op == "Gemm" and dict(prod.attrs) != CANONICAL):
        return False
    b = graph.const_data(prod.inputs[2]) if len(prod.inputs) > 2 else np.zeros(w.shape[0], w.dtype)
    if b is None or b.shape != (w.shape[0],):
        return False
    scaled = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    inputs = [
        prod.inputs[0],
        set_const_input(graph, prod, 1, scaled, f"{prod.name}.weight"),
        set_const_input(graph, prod, 2, (b * s + t).astype(w.dtype), f"{prod.name}.bias"),
    ]
    graph.replace_node(node, [new_node(graph, prod.op, inputs, node.outputs, prod.attrs, prod.name)])
    graph.nodes.remove(prod)
    return True
