"""Checks of a quantized graph on data: how close each requantization comes to wrapping.

`wrap_margins(graph, inputs)` runs the graph and, for every requantizing op (QConv, QGemm,
QAdd, QGlobalAvgPool), recomputes its 32-bit intermediates without wrapping (int64): the
accumulator plus bias, the product by the multiplier, and the rounding add. The margin of a node
is the largest |intermediate| over all inputs divided by 2**31: below 1 nothing wrapped, and the
rule of compiler.quant.requant keeps it near 1 / HEADROOM on the calibration data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from compiler.graph.interp import evaluate_node
from compiler.graph.ir import Graph, Node
from compiler.graph.opdefs.qops import gemm_acc, precise_steps, qconv_acc

LIMIT = float(1 << 31)
REQUANTIZING = ("QConv", "QGemm", "QAdd", "QGlobalAvgPool")


def wrap_margins(graph: Graph, inputs: Iterable[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """Largest |unwrapped intermediate| / 2**31 of each requantizing node, by node name."""
    margins = {n.name: 0.0 for n in graph.nodes if n.op in REQUANTIZING}
    for feeds in inputs:
        env = {k: v.data for k, v in graph.values.items() if v.data is not None}
        env.update({k: np.asarray(v) for k, v in feeds.items()})
        for node in graph.nodes:
            arrays = [env[x] for x in node.inputs]
            if node.op in REQUANTIZING:
                margins[node.name] = max(
                    margins[node.name], float(np.abs(_intermediates(node, arrays)).max()) / LIMIT
                )
            env.update(zip(node.outputs, evaluate_node(graph, node, arrays), strict=True))
    return margins


def _intermediates(node: Node, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The values entering and leaving each 32-bit step, unwrapped (int64, flattened)."""
    shift = node.int_attr("shift")
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    if node.op in ("QConv", "QGemm"):
        x, w, bias, mult = arrays[:4]
        acc = qconv_acc(x, w, node.attrs, wrap=False) if node.op == "QConv" else gemm_acc(x, w, wrap=False)
        shape = [1] * acc.ndim
        shape[1] = -1
        t = acc + bias.astype(np.int64).reshape(shape)
        split = node.int_attr("split")
        if split:  # precise: t clamped, then the two-part multiply (qops.precise_steps)
            lo, hi = (a.astype(np.int64).reshape(shape) for a in arrays[4:6])
            clamped = np.clip(t, lo, hi)
            steps = precise_steps(clamped, mult.astype(np.int64).reshape(shape), shift, split)
            return np.concatenate([s.ravel() for s in [acc, t, *steps]])
        product = t * mult.astype(np.int64).reshape(shape)
        steps = [acc, t, product]
        if len(arrays) == 5:  # a fused residual, added after the multiply
            scaled = arrays[4].astype(np.int64) * node.int_attr("mult_r")
            product = product + scaled
            steps += [scaled, product]
        return np.concatenate([s.ravel() for s in steps] + [product.ravel() + rounding])
    if node.op == "QAdd":
        a, b = (x.astype(np.int64) for x in arrays)
        pa, pb = a * node.int_attr("mult_a"), b * node.int_attr("mult_b")
        return np.concatenate([pa.ravel(), pb.ravel(), (pa + pb).ravel(), (pa + pb).ravel() + rounding])
    total = arrays[0].astype(np.int64).sum(axis=(2, 3))
    product = total * node.int_attr("mult")
    return np.concatenate([total.ravel(), product.ravel(), product.ravel() + rounding])
