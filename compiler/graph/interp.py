"""Numpy reference interpreter of the graph IR (fp32 and the integer shape computations).

It runs each node through the op table's evaluator, so it defines what a graph means: import
and every pass are checked by running the graph before and after against onnxruntime on the
original model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache

import numpy as np

from compiler.errors import GraphError
from compiler.graph.ir import Graph, Node, type_str
from compiler.graph.opdefs import OPS


def run_graph(graph: Graph, inputs: Mapping[str, np.ndarray], keep: Iterable[str] = (),
              given: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The graph's outputs, by name, for `inputs` (every graph input, exact shape and dtype),
    and the values named in `keep` (intermediates the caller inspects). A value named in `given`
    takes that array instead of the one its node computes (another executor's result, so that
    what follows is checked on the same operands).

    Raises GraphError naming a missing, unknown or wrongly shaped or typed input.
    """
    env: dict[str, np.ndarray] = {k: v.data for k, v in graph.values.items() if v.data is not None}
    for name, array in _checked_inputs(graph, inputs).items():
        env[name] = array
    kept = [*graph.outputs, *(k for k in keep if k not in graph.outputs)]
    last = last_uses(graph, kept)
    given = given or {}
    needed = _needed(graph, kept, given)
    for i, node in enumerate(graph.nodes):
        if i in needed:  # else it only feeds values that `given` replaces: its results go unused
            results = evaluate_node(graph, node, [env[x] for x in node.inputs])
            env.update(zip(node.outputs, results, strict=True))
        env.update((name, given[name]) for name in node.outputs if name in given)
        for name in last.get(i, ()):
            env.pop(name, None)  # free intermediates early: whole models hold many activations
    return {name: env[name] for name in kept}


def _needed(graph: Graph, kept: Iterable[str], given: Mapping[str, np.ndarray]) -> set[int]:
    """Indices of the nodes whose results reach a `kept` value other than through a value that
    `given` replaces (every node when nothing is given)."""
    if not given:
        return set(range(len(graph.nodes)))
    producer = {name: i for i, node in enumerate(graph.nodes) for name in node.outputs}
    needed: set[int] = set()
    wanted = [name for name in kept if name not in given]
    while wanted:
        i = producer.get(wanted.pop())
        if i is None or i in needed:
            continue
        needed.add(i)
        wanted.extend(x for x in graph.nodes[i].inputs if x not in given)
    return needed


def evaluate_node(graph: Graph, node: Node, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run one node; its results must have the shapes and dtypes its output values declare."""
    results = OPS[node.op].evaluate(arrays, node.attrs)
    for name, array in zip(node.outputs, results, strict=True):
        value = graph.values[name]
        named = _named_dtype(value.dtype)  # not compared when None: np.dtype(None) is float64
        if array.shape != value.shape or named is None or array.dtype != named:
            raise GraphError(
                f"node {node.name} ({node.op}): evaluated {type_str(array.shape, array.dtype.name)} "
                f"for output {name}, declared {value.type_str()}"
            )
    return results


@cache
def _named_dtype(name: str) -> np.dtype | None:
    """The numpy dtype whose name is `name` (None: no such dtype), for comparing an evaluated
    array's dtype with its value's without reading `dtype.name` (slow) for every result."""
    try:
        dtype = np.dtype(name)
    except TypeError:
        return None
    return dtype if dtype.name == name else None


def _checked_inputs(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    unknown = sorted(set(inputs) - set(graph.inputs))
    if unknown:
        raise GraphError(f"unknown input {unknown[0]} (graph inputs: {', '.join(graph.inputs)})")
    out = {}
    for name in graph.inputs:
        if name not in inputs:
            raise GraphError(f"missing input {name}")
        array, value = np.asarray(inputs[name]), graph.values[name]
        if array.shape != value.shape:
            raise GraphError(f"input {name} has shape {array.shape}, the graph expects {value.shape}")
        if array.dtype.name != value.dtype:
            raise GraphError(f"input {name} has dtype {array.dtype.name}, the graph expects {value.dtype}")
        out[name] = array
    return out


def last_uses(graph: Graph, kept: Iterable[str] = ()) -> dict[int, list[str]]:
    """For each node index, the values (not outputs, not kept, not constant) whose last reader
    it is: what an evaluator may free after that node."""
    last: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        for name in node.inputs:
            last[name] = i
    keep = {*graph.outputs, *kept}
    by_node: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in keep and not graph.values[name].is_const:
            by_node.setdefault(i, []).append(name)
    return by_node
