"""Explicit padding folded into the convolution or pooling that reads it: a constant Pad of the
spatial dimensions only (what TensorFlow-style "same" padding exports as, PyTorch's F.pad and
tf2onnx alike, once the frontend's constant folding has turned the exporter's ConstantOfShape
/ Concat / Reshape / Slice / Transpose / Cast chain into constant pads) feeding a Conv (pad
value 0), an AveragePool that counts pads (count_include_pad=1, value 0) or a MaxPool (value
-inf: its own padding never wins) becomes that node's `pads`, added to its own. The Pad dies
when nothing else reads it. Asymmetric pads stay asymmetric in the node's `pads` (the host runs
such a convolution; the accelerator takes symmetric ones, compiler.runtime.accel)."""

from __future__ import annotations

import math

from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import produced_by, rewrite

_WINDOWED = ("Conv", "AveragePool", "MaxPool")


def fold_pads(graph: Graph) -> Graph:
    return rewrite(graph, _fold)


def _fold(graph: Graph, node: Node) -> bool:
    if node.op not in _WINDOWED:
        return False
    pad = produced_by(graph, node.inputs[0], "Pad")
    if pad is None or not _foldable(graph, pad, node):
        return False
    pads = pad.ints_attr("pads")
    rank = len(pads) // 2
    spatial = rank - 2
    own = node.ints_attr("pads") if "pads" in node.attrs else (0,) * (2 * spatial)
    merged = tuple(own[i] + pads[2 + i] for i in range(spatial)) + tuple(
        own[spatial + i] + pads[rank + 2 + i] for i in range(spatial))
    folded = node.with_inputs((pad.inputs[0], *node.inputs[1:])).with_attrs(pads=merged)
    graph.replace_node(node, [folded])
    return True


def _foldable(graph: Graph, pad: Node, node: Node) -> bool:
    """A constant pad of the spatial axes only, non-negative, whose value the node's own padding
    stands for (0 for Conv and a counting AveragePool, -inf for MaxPool)."""
    pads = pad.ints_attr("pads")
    rank = len(pads) // 2
    if str(pad.attrs.get("mode", "constant")) != "constant" or rank < 3 or min(pads) < 0:
        return False
    if pads[0] or pads[1] or pads[rank] or pads[rank + 1]:
        return False
    value = float(pad.attrs.get("value", 0.0))  # type: ignore[arg-type]
    if node.op == "MaxPool":
        return value == -math.inf and not node.attrs.get("ceil_mode")
    if node.op == "AveragePool":
        return value == 0.0 and bool(node.attrs.get("count_include_pad")) and not node.attrs.get("ceil_mode")
    return value == 0.0 and graph.values[pad.inputs[0]].dtype == "float32"
