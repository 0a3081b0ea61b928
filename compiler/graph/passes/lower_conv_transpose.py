"""Transposed convolutions as the convolutions the accelerator runs, in the two forms decoders
write (2-D, constant weights, no output_padding):

- stride 1: a convolution with the weights flipped and each group's in/out channels swapped,
  padded by dilation * (kernel - 1) - pad on each side (when no pad exceeds that);
- kernel == stride, no pads, no dilation, one group (U-Net's, DB-Net's 2x2/2 upsampling): each
  input pixel writes its own s x s output block, so it is a 1x1 convolution to M * s * s
  channels followed by a depth-to-space shuffle (Reshape, Transpose, Reshape) on the host.

Other transposed convolutions are left to the host. Run before quantization for an accelerator
target (compiler.driver), beside split_groups."""

from __future__ import annotations

import numpy as np

from compiler.graph.builder import new_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import rewrite


def lower_conv_transpose(graph: Graph) -> Graph:
    return rewrite(graph, _lower)


def _lower(graph: Graph, node: Node) -> bool:
    if node.op != "ConvTranspose" or graph.values[node.inputs[0]].rank != 4:
        return False
    if any(node.ints_attr("output_padding")):
        return False
    w = graph.const_data(node.inputs[1])
    bias = graph.const_data(node.inputs[2]) if len(node.inputs) > 2 else None
    if w is None or (len(node.inputs) > 2 and bias is None):
        return False
    strides, dil, pads = node.ints_attr("strides"), node.ints_attr("dilations"), node.ints_attr("pads")
    kernel = w.shape[2:]
    if strides == (1, 1):
        spans = [d * (k - 1) for d, k in zip(dil, kernel, strict=True)]
        conv_pads = tuple(spans[i % 2] - p for i, p in enumerate(pads))
        if min(conv_pads) < 0:
            return False
        graph.replace_node(node, [_flipped(graph, node, w, bias, conv_pads)])
        return True
    if strides == kernel and dil == (1, 1) and not any(pads) and node.int_attr("group") == 1:
        graph.replace_node(node, _depth_to_space(graph, node, w, bias))
        return True
    return False


def _flipped(graph: Graph, node: Node, w: np.ndarray, bias: np.ndarray | None, pads: tuple[int, ...]) -> Node:
    g = node.int_attr("group")
    c, mg = w.shape[:2]
    wc = w.reshape(g, c // g, mg, *w.shape[2:]).swapaxes(1, 2).reshape(g * mg, c // g, *w.shape[2:])
    inputs = [node.inputs[0], graph.add_const(f"{node.name}/w", np.ascontiguousarray(wc[:, :, ::-1, ::-1]))]
    if bias is not None:
        inputs.append(node.inputs[2])
    attrs = {"strides": (1, 1), "pads": pads, "dilations": node.ints_attr("dilations"), "group": g}
    return new_node(graph, "Conv", inputs, list(node.outputs), attrs, node.name)


def _depth_to_space(graph: Graph, node: Node, w: np.ndarray, bias: np.ndarray | None) -> list[Node]:
    n, _, h, wd = graph.values[node.inputs[0]].shape
    c, m, s, t = w.shape
    weight = w.reshape(c, m * s * t).T.reshape(m * s * t, c, 1, 1)  # output channel (m, a, b)
    inputs = [node.inputs[0], graph.add_const(f"{node.name}/w", np.ascontiguousarray(weight))]
    if bias is not None:
        inputs.append(graph.add_const(f"{node.name}/b", np.repeat(bias, s * t)))
    base = node.name
    names = [graph.fresh_name(f"{base}/{x}") for x in ("conv", "blocks", "moved")]
    return [
        new_node(graph, "Conv", inputs, [names[0]],
                 {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1}, f"{base}/conv"),
        new_node(graph, "Reshape", [names[0]], [names[1]], {"shape": (n, m, s, t, h, wd)}, f"{base}/blocks"),
        new_node(graph, "Transpose", [names[1]], [names[2]], {"perm": (0, 1, 4, 2, 5, 3)}, f"{base}/moved"),
        new_node(graph, "Reshape", [names[2]], list(node.outputs), {"shape": (n, m, h * s, wd * t)}, base),
    ]
