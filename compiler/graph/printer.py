"""Canonical text form of a graph; tests compare graphs through it.

```
graph main(x: float32[1,3,8,8]) -> (y)
  const w: float32[4,3,3,3]
  const shift: float32[1] = [0.5]
  c: float32[1,4,8,8] = Conv(x, w) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]
  y: float32[1,4,8,8] = Relu(c)
```

Constants are listed in the order nodes first use them, small ones (at most `SMALL` elements)
with their values; attributes sorted by name; node names are not printed (they only label
messages), so graphs that differ only there print the same. `rename=True` also hides value
names (see `print_graph`).
"""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import AttrValue, Graph, Value

SMALL = 4


def print_graph(graph: Graph, rename: bool = False) -> str:
    """The graph as text. With `rename`, constants print as c0, c1, ... and node outputs as v0,
    v1, ... in order of appearance (graph inputs and outputs keep their names), so graphs that
    differ only in how an exporter named intermediates print the same."""
    consts = _constants_in_use_order(graph)
    names = _canonical_names(graph, consts) if rename else {}

    def show(name: str) -> str:
        return names.get(name, name)

    ins = ", ".join(f"{name}: {graph.values[name].type_str()}" for name in graph.inputs)
    lines = [f"graph {graph.name}({ins}) -> ({', '.join(graph.outputs)})"]
    for name in consts:
        lines.append("  " + _const_line(show(name), graph.values[name]))
    for node in graph.nodes:
        outs = ", ".join(
            f"{show(o)}: {graph.values[o].type_str()}" if o in graph.values else o for o in node.outputs
        )
        attrs = "".join(f" {k}={format_attr(v)}" for k, v in sorted(node.attrs.items()))
        lines.append(f"  {outs} = {node.op}({', '.join(map(show, node.inputs))}){attrs}")
    return "\n".join(lines)


def _canonical_names(graph: Graph, consts: list[str]) -> dict[str, str]:
    keep = set(graph.inputs) | set(graph.outputs)
    names = {c: f"c{i}" for i, c in enumerate(c for c in consts if c not in keep)}
    produced = [o for n in graph.nodes for o in n.outputs if o not in keep]
    names.update({o: f"v{i}" for i, o in enumerate(produced)})
    return names


def _constants_in_use_order(graph: Graph) -> list[str]:
    names = [i for n in graph.nodes for i in n.inputs] + list(graph.outputs)
    names += sorted(graph.values)  # unused constants last (the verifier rejects them)
    return [n for n in dict.fromkeys(names) if n in graph.values and graph.values[n].is_const]


def _const_line(name: str, value: Value) -> str:
    line = f"const {name}: {value.type_str()}"
    if value.data is not None and value.size <= SMALL:
        line += " = " + format_data(value.data)
    return line


def format_data(data: np.ndarray) -> str:
    items = [_scalar(v) for v in data.ravel()]
    return items[0] if data.ndim == 0 else "[" + ", ".join(items) + "]"


def _scalar(v: object) -> str:
    if isinstance(v, np.floating | float):
        return str(np.float32(v))  # shortest text that reads back to the same float32
    if isinstance(v, np.bool_ | bool):
        return str(bool(v)).lower()
    return str(v)


def format_attr(value: AttrValue) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(_scalar(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return _scalar(value)
