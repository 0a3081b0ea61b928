"""The graph verifier: raises GraphError naming the node (or value) and the problem.

Checks the invariants listed in `compiler.graph.ir`: definitions before uses in node order,
single definitions, op arity and attributes against the op table, shapes and dtypes equal to
what the op's rule derives, graph outputs defined, and nothing dead or dangling.
"""

from __future__ import annotations

from compiler.errors import GraphError
from compiler.graph.ir import Graph, Node, type_str
from compiler.graph.opdefs import OPS, OpDef
from compiler.graph.opdefs.base import KINDS


def verify(graph: Graph) -> Graph:
    """Check every invariant of `graph`; returns it unchanged so calls can be chained."""
    _check_values(graph)
    defined = {k for k, v in graph.values.items() if v.is_const} | set(graph.inputs)
    names: set[str] = set()
    for node in graph.nodes:
        _check_node(graph, node, defined)
        if node.name in names:
            raise GraphError(f"node {node.name} ({node.op}): another node has this name")
        names.add(node.name)
        defined.update(node.outputs)
    for out in graph.outputs:
        if out not in defined:
            raise GraphError(f"graph output {out} is not defined")
    _check_liveness(graph)
    return graph


def _check_values(graph: Graph) -> None:
    for key, value in graph.values.items():
        if key != value.name:
            raise GraphError(f"value {value.name} is stored under the name {key}")
    if len(set(graph.inputs)) != len(graph.inputs):
        raise GraphError("a graph input is listed twice")
    for name in graph.inputs:
        if name not in graph.values:
            raise GraphError(f"graph input {name} has no value")
        if graph.values[name].is_const:
            raise GraphError(f"graph input {name} is a constant")


def _check_node(graph: Graph, node: Node, defined: set[str]) -> None:
    where = f"node {node.name} ({node.op})"
    opdef = OPS.get(node.op)
    if opdef is None:
        raise GraphError(f"{where}: unknown op")
    lo, hi = opdef.arity
    if len(node.inputs) < lo or (hi is not None and len(node.inputs) > hi):
        most = "any number" if hi is None else hi
        raise GraphError(f"{where}: {len(node.inputs)} inputs, expected {lo} to {most}")
    _check_attrs(where, opdef, node)
    for name in node.inputs:
        if name not in defined:
            problem = "is used before it is defined" if name in graph.values else "is not defined"
            raise GraphError(f"{where}: input {name} {problem}")
    for name in node.outputs:
        if name in defined:
            raise GraphError(f"{where}: output {name} is already defined")
        if name not in graph.values:
            raise GraphError(f"{where}: output {name} has no value")
        if graph.values[name].is_const:
            raise GraphError(f"{where}: output {name} is a constant")
    _check_types(where, opdef, graph, node)


def _check_attrs(where: str, opdef: OpDef, node: Node) -> None:
    missing = sorted(set(opdef.attrs) - set(node.attrs))
    extra = sorted(set(node.attrs) - set(opdef.attrs))
    if missing or extra:
        raise GraphError(f"{where}: attributes missing {missing}, unknown {extra}")
    for name, spec in opdef.attrs.items():
        value = node.attrs[name]
        ok = isinstance(value, KINDS[spec.kind])
        if isinstance(value, tuple):
            ok = ok and all(isinstance(v, int if spec.kind == "ints" else float) for v in value)
        if not ok:
            raise GraphError(f"{where}: attribute {name}={value!r} is not of kind {spec.kind}")


def _check_types(where: str, opdef: OpDef, graph: Graph, node: Node) -> None:
    inputs = [graph.values[i] for i in node.inputs]
    try:
        expected = opdef.infer(inputs, node.attrs)
    except GraphError as e:
        raise GraphError(f"{where}: {e}") from None
    if len(expected) != len(node.outputs):
        raise GraphError(f"{where}: {len(node.outputs)} outputs, the op has {len(expected)}")
    for name, (shape, dtype) in zip(node.outputs, expected, strict=True):
        value = graph.values[name]
        if value.shape != shape or value.dtype != dtype:
            want = type_str(shape, dtype)
            raise GraphError(f"{where}: output {name} is {value.type_str()}, the rule gives {want}")


def _check_liveness(graph: Graph) -> None:
    used = set(graph.outputs) | {i for n in graph.nodes for i in n.inputs}
    for node in graph.nodes:
        if not any(o in used for o in node.outputs):
            raise GraphError(f"node {node.name} ({node.op}): dead (no output is used)")
    produced = {o for n in graph.nodes for o in n.outputs}
    for name, value in graph.values.items():
        if name in graph.inputs or name in produced:
            continue
        if not value.is_const:
            raise GraphError(f"value {name} is dangling: not an input, a constant or a node output")
        if name not in used:
            raise GraphError(f"constant {name} is not used")
