"""The graph IR: static-shaped values, nodes with typed attributes, graphs in topological order.

Every later graph pass (quantization, fusion, layout packing, partitioning, memory planning) and
the runtime work on this IR. Its invariants, checked by `compiler.graph.verify`:

- every `Value` has a static shape (a tuple of non-negative ints; `()` is a scalar) and a dtype
  given as a numpy dtype name (`"float32"`, `"int64"`, `"int8"`, ...);
- a value is exactly one of: a graph input, a constant (`data` set, no producer), or the output
  of exactly one node;
- nodes refer to values by name and are stored in topological order;
- each node's op is in the op table (`compiler.graph.opdefs.OPS`) and its attributes are exactly
  that op's attributes, with defaults filled in, so passes never consult ONNX defaults;
- no node is dead: each has an output that a node or the graph's outputs use.

`Value` and `Node` are frozen; `Graph` is a mutable container that passes `copy()` first and then
edit, so a pass is `Graph -> Graph` without changing its argument.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Union

import numpy as np

from compiler.errors import GraphError

AttrValue = Union[int, float, str, tuple[int, ...], tuple[float, ...]]
Shape = tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Value:
    """A tensor: `name`, static `shape`, numpy dtype name, and `data` when it is a constant.

    Constant data is stored read-only with exactly this shape and dtype.
    """

    name: str
    shape: Shape
    dtype: str
    data: np.ndarray | None = None

    def __post_init__(self) -> None:
        shape = tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise GraphError(f"value {self.name}: negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(self.dtype).name)
        if self.data is not None:
            data = np.array(self.data, dtype=self.dtype, copy=True)
            if data.shape != shape:
                raise GraphError(f"value {self.name}: data shape {data.shape} is not {shape}")
            data.setflags(write=False)
            object.__setattr__(self, "data", data)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def type_str(self) -> str:
        return type_str(self.shape, self.dtype)


def type_str(shape: Shape, dtype: str) -> str:
    """How types print: `float32[1,3,224,224]`, `int64[]` for a scalar."""
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


def const(name: str, data: np.ndarray) -> Value:
    """A constant value whose shape and dtype are those of `data`."""
    arr = np.asarray(data)
    return Value(name, arr.shape, arr.dtype.name, arr)


def _normalize_attr(name: str, value: object) -> AttrValue:
    """One canonical Python type per attribute kind; floats rounded to float32 precision (ONNX
    stores float attributes as float32, so patterns written in float64 compare equal)."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(np.float32(value))
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple | np.ndarray):
        items = np.asarray(value).ravel().tolist()
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return tuple(items)
        if all(isinstance(v, int | float) for v in items):
            return tuple(float(np.float32(v)) for v in items)
    raise GraphError(f"attribute {name}: unsupported value {value!r}")


def attr_int(attrs: Mapping[str, AttrValue], name: str) -> int:
    value = attrs[name]
    assert isinstance(value, int), f"attribute {name}={value!r} is not an int"
    return value


def attr_float(attrs: Mapping[str, AttrValue], name: str) -> float:
    value = attrs[name]
    assert isinstance(value, float | int), f"attribute {name}={value!r} is not a float"
    return float(value)


def attr_ints(attrs: Mapping[str, AttrValue], name: str) -> tuple[int, ...]:
    value = attrs[name]
    assert isinstance(value, tuple), f"attribute {name}={value!r} is not a list of ints"
    return tuple(int(v) for v in value)


def attr_str(attrs: Mapping[str, AttrValue], name: str) -> str:
    return str(attrs[name])


@dataclass(frozen=True)
class Node:
    """One operation: `op` from the op table, input and output value names, typed attributes.

    `name` identifies the node in messages; it defaults to the first output's name.
    """

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, AttrValue] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        attrs = {k: _normalize_attr(k, v) for k, v in sorted(self.attrs.items())}
        object.__setattr__(self, "attrs", MappingProxyType(attrs))
        if not self.name:
            object.__setattr__(self, "name", self.outputs[0] if self.outputs else self.op)

    def int_attr(self, name: str) -> int:
        return attr_int(self.attrs, name)

    def float_attr(self, name: str) -> float:
        return attr_float(self.attrs, name)

    def ints_attr(self, name: str) -> tuple[int, ...]:
        return attr_ints(self.attrs, name)

    def with_inputs(self, inputs: Iterable[str]) -> Node:
        return replace(self, inputs=tuple(inputs))

    def with_attrs(self, **attrs: AttrValue) -> Node:
        return replace(self, attrs={**self.attrs, **attrs})


class Graph:
    """Values by name, nodes in topological order, and the graph's input and output names."""

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.values: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []

    # -- building -----------------------------------------------------------------------------

    def add_value(self, value: Value) -> Value:
        if value.name in self.values:
            raise GraphError(f"value {value.name} is defined twice")
        self.values[value.name] = value
        return value

    def add_input(self, name: str, shape: Shape, dtype: str) -> Value:
        self.inputs.append(name)
        return self.add_value(Value(name, shape, dtype))

    def add_const(self, name: str, data: np.ndarray) -> str:
        """Add a constant under `name`, or a fresh variant of it if taken; the name used."""
        name = self.fresh_name(name)
        self.add_value(const(name, data))
        return name

    def fresh_name(self, base: str) -> str:
        """`base`, or `base.1`, `base.2`, ... whichever is not yet a value name."""
        if base not in self.values:
            return base
        i = 1
        while f"{base}.{i}" in self.values:
            i += 1
        return f"{base}.{i}"

    # -- queries ------------------------------------------------------------------------------

    def producer(self, name: str) -> Node | None:
        """The node that outputs `name`, or None for inputs and constants."""
        return self.producers().get(name)

    def producers(self) -> dict[str, Node]:
        return {out: n for n in self.nodes for out in n.outputs}

    def consumers(self, name: str) -> list[Node]:
        """Nodes that read `name`, in graph order (a node reading it twice appears once)."""
        return [n for n in self.nodes if name in n.inputs]

    def consumer_map(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in dict.fromkeys(n.inputs):
                users.setdefault(name, []).append(n)
        return users

    def const_data(self, name: str) -> np.ndarray | None:
        """The data of a constant value, None for anything else."""
        value = self.values.get(name)
        return None if value is None else value.data

    # -- editing ------------------------------------------------------------------------------

    def replace_node(self, old: Node, new: Iterable[Node]) -> None:
        """Put `new` (already-defined outputs) where `old` was; `old`'s outputs stay defined."""
        i = self.nodes.index(old)
        self.nodes[i : i + 1] = list(new)

    def replace_uses(self, old: str, new: str) -> None:
        """Make every node and graph output that reads `old` read `new` instead."""
        self.nodes = [
            n.with_inputs(new if i == old else i for i in n.inputs) if old in n.inputs else n
            for n in self.nodes
        ]
        self.outputs = [new if o == old else o for o in self.outputs]

    def bypass(self, node: Node, new: str) -> bool:
        """Remove single-output `node`, whose output equals value `new`; False if it must stay.

        Uses of the output go to `new`. Graph output names are kept: when the output is a graph
        output, `new` is renamed to it if `new` is produced by a node and is not itself a graph
        output; otherwise (a graph input, a constant, another output) the node stays.
        """
        (old,) = node.outputs
        if old in self.outputs:
            if new in self.outputs or self.producer(new) is None:
                return False
            self.nodes.remove(node)
            del self.values[old]
            self._rename(new, old)
            return True
        self.nodes.remove(node)
        self.replace_uses(old, new)
        return True

    def _rename(self, old: str, new: str) -> None:
        """Rename value `old` to the free name `new` everywhere."""
        self.values[new] = replace(self.values.pop(old), name=new)
        swap = lambda names: tuple(new if x == old else x for x in names)
        self.nodes = [
            replace(n, inputs=swap(n.inputs), outputs=swap(n.outputs), name=new if n.name == old else n.name)
            for n in self.nodes
        ]
        self.inputs = list(swap(self.inputs))
        self.outputs = list(swap(self.outputs))

    def remove_dead(self) -> Graph:
        """Drop nodes none of whose outputs is used, and values nothing refers to; returns self."""
        live = set(self.outputs)
        kept: list[Node] = []
        for n in reversed(self.nodes):
            if any(o in live for o in n.outputs):
                kept.append(n)
                live.update(n.inputs)
        self.nodes = kept[::-1]
        defined = {o for n in self.nodes for o in n.outputs}
        keep = live | defined | set(self.inputs)
        self.values = {k: v for k, v in self.values.items() if k in keep}
        return self

    def toposort(self) -> Graph:
        """Reorder nodes topologically, keeping the given order where it already is; returns self.

        Raises GraphError on a cycle or on an input that nothing defines.
        """
        defined = {k for k, v in self.values.items() if v.is_const} | set(self.inputs)
        producer = {o: i for i, n in enumerate(self.nodes) for o in n.outputs}
        waiting: list[set[int]] = []
        users: dict[int, list[int]] = {}
        for i, n in enumerate(self.nodes):
            deps = {producer[x] for x in n.inputs if x not in defined and x in producer}
            missing = [x for x in n.inputs if x not in defined and x not in producer]
            if missing:
                raise GraphError(f"node {n.name} ({n.op}): input {missing[0]} is never defined")
            waiting.append(deps)
            for d in deps:
                users.setdefault(d, []).append(i)
        ready = [i for i, deps in enumerate(waiting) if not deps]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users.get(i, []):
                waiting[u].discard(i)
                if not waiting[u]:
                    heapq.heappush(ready, u)
        if len(order) < len(self.nodes):
            stuck = next(self.nodes[i] for i, deps in enumerate(waiting) if deps)
            raise GraphError(f"node {stuck.name} ({stuck.op}): its inputs form a cycle")
        self.nodes = [self.nodes[i] for i in order]
        return self

    def copy(self) -> Graph:
        """A new graph sharing the (immutable) values and nodes, with its own containers."""
        g = Graph(self.name)
        g.values = dict(self.values)
        g.nodes = list(self.nodes)
        g.inputs = list(self.inputs)
        g.outputs = list(self.outputs)
        return g

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes>"
