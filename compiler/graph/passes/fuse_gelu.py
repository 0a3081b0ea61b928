"""The exact GELU as exporters before opset 20 write it, 0.5 * x * (1 + erf(x / sqrt 2)), becomes
one Gelu node. Matched forms: x / sqrt(2) or x * (1 / sqrt(2)) into the Erf; then + 1; then the
products with x and with 0.5 in any order: ((x * e) * 0.5), ((e * 0.5) * x), (e * (0.5 * x)),
where e = 1 + erf(...). Intermediates must have no other reader."""

from __future__ import annotations

import math

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import is_scalar, produced_by, rewrite, sole_user, split_const


def fuse_gelu(graph: Graph) -> Graph:
    return rewrite(graph, _gelu)


def _erf_argument(graph: Graph, erf: Node) -> str | None:
    """x, if the Erf reads x / sqrt(2) or x * (1 / sqrt(2)) computed only for it."""
    scaled = produced_by(graph, erf.inputs[0], "Div", "Mul")
    if scaled is None or sole_user(graph, scaled.outputs[0]) is not erf:
        return None
    split = split_const(graph, scaled)
    if split is None:
        return None
    x = split[0]
    const_name = scaled.inputs[1] if scaled.inputs[0] == x else scaled.inputs[0]
    if scaled.op == "Div":
        ok = const_name == scaled.inputs[1] and is_scalar(graph, const_name, math.sqrt(2.0))
    else:
        ok = is_scalar(graph, const_name, 1.0 / math.sqrt(2.0))
    return x if ok else None


def _mul_by(graph: Graph, node: Node | None, operand: str) -> str | None:
    """If `node` is a Mul with `operand` as one input, the other input."""
    if node is None or node.op != "Mul" or operand not in node.inputs or len(set(node.inputs)) != 2:
        return None
    return node.inputs[1] if node.inputs[0] == operand else node.inputs[0]


def _is_half(graph: Graph, name: str) -> bool:
    return is_scalar(graph, name, 0.5)


def _is_half_x(graph: Graph, name: str, x: str) -> bool:
    """Whether `name` is 0.5 * x computed only for the Gelu."""
    node = produced_by(graph, name, "Mul")
    return (
        node is not None
        and sole_user(graph, name) is not None
        and _is_half(graph, _mul_by(graph, node, x) or "")
    )


def _gelu_output(graph: Graph, e: str, x: str) -> str | None:
    """The value equal to 0.5 * x * e, following the Mul nodes after e = 1 + erf(.)."""
    m1 = sole_user(graph, e)
    o1 = _mul_by(graph, m1, e)
    if m1 is None or o1 is None:
        return None
    if _is_half_x(graph, o1, x):
        return m1.outputs[0]
    m2 = sole_user(graph, m1.outputs[0])
    o2 = _mul_by(graph, m2, m1.outputs[0])
    if m2 is None or o2 is None:
        return None
    if (o1 == x and _is_half(graph, o2)) or (_is_half(graph, o1) and o2 == x):
        return m2.outputs[0]
    return None


def _gelu(graph: Graph, node: Node) -> bool:
    if node.op != "Erf":
        return False
    x = _erf_argument(graph, node)
    add = sole_user(graph, node.outputs[0])
    if x is None or add is None or add.op != "Add":
        return False
    split = split_const(graph, add)
    if split is None or split[0] != node.outputs[0] or not is_scalar(graph, _other(add, split[0]), 1.0):
        return False
    out = _gelu_output(graph, add.outputs[0], x)
    if out is None:
        return False
    last = graph.producer(out)
    assert last is not None
    graph.replace_node(last, [new_node(graph, "Gelu", [x], [out], {"approximate": "none"}, last.name)])
    return True


def _other(node: Node, name: str) -> str:
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]
