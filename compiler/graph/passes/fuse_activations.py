"""Hard activations in one form each, as exporters write them in several:

- Clip(x + 3, 0, 6) / 6 (or * 1/6)              -> HardSigmoid(x, alpha=1/6, beta=1/2)
- x * HardSigmoid(x, 1/6, 1/2) (either order)   -> HardSwish(x)
- x * Clip(x + 3, 0, 6) / 6 (or * 1/6)          -> HardSwish(x)

Intermediate values must have no other reader, so nothing else sees the rewrite.
"""

from __future__ import annotations

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import is_scalar, other_input, produced_by, rewrite, sole_user, split_const

SIXTH = 1.0 / 6.0


def fuse_activations(graph: Graph) -> Graph:
    return rewrite(graph, _hard_sigmoid, _hard_swish, _hard_swish_clip)


def _divided_by_six(graph: Graph, node: Node) -> str | None:
    """If `node` is v / 6 or v * (1/6) (either order), the value v."""
    split = split_const(graph, node)
    if split is None:
        return None
    v, c = split
    six = node.op == "Div" and node.inputs[1] != v and is_scalar(graph, node.inputs[1], 6.0)
    sixth = node.op == "Mul" and c.size == 1 and abs(float(c.reshape(-1)[0]) - SIXTH) < 1e-6
    return v if six or sixth else None


def _relu6_of_plus3(graph: Graph, name: str) -> str | None:
    """If `name` is Clip(x + 3, 0, 6) with the sum read only by the Clip, the value x."""
    clip = produced_by(graph, name, "Clip")
    if clip is None or (clip.attrs["min"], clip.attrs["max"]) != (0.0, 6.0):
        return None
    add = produced_by(graph, clip.inputs[0], "Add")
    if add is None or sole_user(graph, add.outputs[0]) is not clip:
        return None
    split = split_const(graph, add)
    return split[0] if split is not None and is_scalar(graph, _const_of(graph, add), 3.0) else None


def _const_of(graph: Graph, node: Node) -> str:
    return next(i for i in node.inputs if graph.const_data(i) is not None)


def _hard_sigmoid(graph: Graph, node: Node) -> bool:
    if node.op not in ("Div", "Mul"):
        return False
    v = _divided_by_six(graph, node)
    x = _relu6_of_plus3(graph, v) if v is not None and sole_user(graph, v) is node else None
    if x is None:
        return False
    attrs = {"alpha": SIXTH, "beta": 0.5}
    graph.replace_node(node, [new_node(graph, "HardSigmoid", [x], node.outputs, attrs, node.name)])
    return True


def _hard_swish(graph: Graph, node: Node) -> bool:
    """Mul(x, HardSigmoid(x, 1/6, 1/2))."""
    if node.op != "Mul" or len(node.inputs) != 2:
        return False
    for h in node.inputs:
        hs = produced_by(graph, h, "HardSigmoid")
        if hs is None or other_input(node, h) != hs.inputs[0] or sole_user(graph, h) is not node:
            continue
        if abs(hs.float_attr("alpha") - SIXTH) < 1e-6 and hs.float_attr("beta") == 0.5:
            graph.replace_node(
                node, [new_node(graph, "HardSwish", [hs.inputs[0]], node.outputs, name=node.name)]
            )
            return True
    return False


def _hard_swish_clip(graph: Graph, node: Node) -> bool:
    """Div(Mul(x, Clip(x + 3, 0, 6)), 6) and its * 1/6 form."""
    if node.op not in ("Div", "Mul"):
        return False
    product = _divided_by_six(graph, node)
    mul = produced_by(graph, product, "Mul") if product is not None else None
    if mul is None or sole_user(graph, mul.outputs[0]) is not node:
        return False
    for r in mul.inputs:
        x = _relu6_of_plus3(graph, r)
        if x is not None and other_input(mul, r) == x and sole_user(graph, r) is mul:
            graph.replace_node(node, [new_node(graph, "HardSwish", [x], node.outputs, name=node.name)])
            return True
    return False
