"""Helpers the graph passes share: a rewrite loop and small pattern-matching queries."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.graph.ir import Graph, Node, const

Rule = Callable[[Graph, Node], bool]


def rewrite(graph: Graph, *rules: Rule) -> Graph:
    """Apply `rules` to every node until none fires; a new graph, dead nodes removed.

    A rule gets the graph and a node, edits the graph in place when it matches and returns
    True. It keeps output names: the node(s) it puts in place write the value the matched
    pattern wrote last, and nodes it no longer needs simply die.
    """
    g = graph.copy()
    changed = True
    while changed:
        changed = False
        for node in list(g.nodes):
            for rule in rules:
                if node in g.nodes and rule(g, node):
                    changed = True
        g.remove_dead()
    return g


def scalar(graph: Graph, name: str) -> float | None:
    """The value of a one-element constant, else None."""
    data = graph.const_data(name)
    return float(data.reshape(-1)[0]) if data is not None and data.size == 1 else None


def is_scalar(graph: Graph, name: str, value: float, rel: float = 1e-5) -> bool:
    """Whether `name` is a one-element constant equal to `value` (to float32 rounding)."""
    got = scalar(graph, name)
    return got is not None and abs(got - value) <= rel * max(1.0, abs(value))


def sole_user(graph: Graph, name: str) -> Node | None:
    """The only node reading `name`, if exactly one does and `name` is not a graph output."""
    if name in graph.outputs:
        return None
    users = graph.consumers(name)
    return users[0] if len(users) == 1 else None


def produced_by(graph: Graph, name: str, *ops: str) -> Node | None:
    """The producer of `name` if its op is one of `ops`."""
    node = graph.producer(name)
    return node if node is not None and node.op in ops else None


def other_input(node: Node, name: str) -> str | None:
    """For a two-input node reading `name` once, the other input."""
    if len(node.inputs) != 2 or node.inputs.count(name) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def split_const(graph: Graph, node: Node) -> tuple[str, np.ndarray] | None:
    """For a two-input node with exactly one constant input: (the other input, the constant)."""
    if len(node.inputs) != 2:
        return None
    a, b = (graph.const_data(i) for i in node.inputs)
    if a is not None and b is None:
        return node.inputs[1], a
    if b is not None and a is None:
        return node.inputs[0], b
    return None


def set_const_input(graph: Graph, node: Node, index: int, data: np.ndarray, fresh: str) -> str:
    """The name under which `node`'s input `index` should read `data`.

    When that input is a constant only this node reads, its data is replaced under the same name
    (folded weights keep their names); otherwise a new constant named after `fresh` is added.
    """
    if index < len(node.inputs):
        name = node.inputs[index]
        if (
            graph.const_data(name) is not None
            and name not in graph.outputs
            and graph.consumers(name) == [node]
        ):
            graph.values[name] = const(name, data)
            return name
    return graph.add_const(fresh, data)
