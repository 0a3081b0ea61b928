"""Grouped (not depthwise) convolutions as group-1 convolutions the accelerator runs: each piece
a GEMM with its own weights, reading its channel slice, the pieces' outputs concatenated.

A group narrower than `block_in` input channels would mostly multiply padding on a GEMM core
whose input block is `block_in` wide; such groups are packed `p` to a piece (the fewest that fill
the block, `p` dividing the group count) with a block-diagonal weight, whose zero blocks add
exact zeros. Depthwise convolutions (one input channel per group) and convolutions whose weight
is not constant are left as they are.

    Conv(x, w, b, group=3)   ->   Concat(Conv(Slice(x, 0:c/3), w0, b0), Conv(..., w1, b1), ...)

Run before quantization for an accelerator target (compiler.driver): the pieces are quantized
and partitioned as any group-1 convolution, so ShuffleNet's and ResNeXt's grouped 1x1 and 3x3
convolutions offload."""

from __future__ import annotations

import numpy as np

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import rewrite


def split_groups(graph: Graph, block_in: int = 16) -> Graph:
    """`graph` with every constant-weight grouped, non-depthwise Conv split as the module says."""
    return rewrite(graph, lambda g, node: _split(g, node, block_in))


def pack_factor(groups: int, group_in: int, block_in: int) -> int:
    """How many groups share one piece: the smallest divisor of `groups` whose groups together
    have at least `block_in` input channels (all of them if none does)."""
    for p in range(1, groups + 1):
        if groups % p == 0 and p * group_in >= block_in:
            return p
    return groups


def _split(graph: Graph, node: Node, block_in: int) -> bool:
    if node.op != "Conv" or node.int_attr("group") == 1:
        return False
    groups = node.int_attr("group")
    w = graph.const_data(node.inputs[1])
    bias = graph.const_data(node.inputs[2]) if len(node.inputs) > 2 else None
    if w is None or w.shape[1] == 1 or (len(node.inputs) > 2 and bias is None):
        return False
    m, cg = w.shape[0], w.shape[1]
    mg, p = m // groups, pack_factor(groups, cg, block_in)
    attrs = {**node.attrs, "group": 1}
    pieces, outs = [], []
    for i in range(groups // p):
        base = f"{node.name}/g{i}"
        sliced = graph.fresh_name(f"{base}/x")
        pieces.append(new_node(graph, "Slice", [node.inputs[0]], [sliced],
                               {"axes": (1,), "starts": (i * p * cg,), "ends": ((i + 1) * p * cg,),
                                "steps": (1,)}, f"{base}/slice"))
        weight = np.zeros((p * mg, p * cg, *w.shape[2:]), w.dtype)  # block-diagonal when p > 1
        for j in range(p):
            weight[j * mg:(j + 1) * mg, j * cg:(j + 1) * cg] = w[(i * p + j) * mg:(i * p + j + 1) * mg]
        inputs = [sliced, graph.add_const(f"{base}/w", weight)]
        if bias is not None:
            inputs.append(graph.add_const(f"{base}/b", bias[i * p * mg:(i + 1) * p * mg].copy()))
        out = graph.fresh_name(f"{base}/y")
        pieces.append(new_node(graph, "Conv", inputs, [out], attrs, f"{base}/conv"))
        outs.append(out)
    pieces.append(new_node(graph, "Concat", outs, list(node.outputs), {"axis": 1}, node.name))
    graph.replace_node(node, pieces)
    return True
