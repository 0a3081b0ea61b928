"""Empirical bias correction (Nagel et al. 2019, "Data-Free Quantization", section 4.2).

Rounding weights and activations shifts each output channel's mean a little: a ReLU6 output
whose values crowd near zero rounds up or down on average, a clipped one loses its top, and
the batch norms folded into the next layers scale those shifts up, layer after layer. Each
QConv/QGemm's bias absorbs its shift: the quantized graph runs on the calibration inputs in
topological order, and before a layer's outputs are passed on, its bias is lowered by the
difference between the mean of its accumulator (plus bias) per channel and the float graph's
mean of the same pre-activation on the same inputs, in accumulator steps. Layers are corrected
in order, so each one sees the inputs that the corrected layers before it produce. The integer
ops are unchanged; only int32 bias constants move.

The quantizer corrects convolutions only. On validation inputs (seed 5000) the correction takes
MobileNetV2's logit mean squared error against fp32 from 0.078 to 0.067 (mean cosine 0.9958 to
0.9967, 200 inputs) but ResNet-18's from 0.0117 to 0.0140 (cosine 0.99949 to 0.99939, 50);
on bert-tiny's dense layers, calibrated on 8 inputs, it took the mean cosine over 6 test inputs
from above 0.98 to 0.905: a few token rows estimate per-channel means too poorly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.graph.interp import evaluate_node, last_uses
from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs.qops import INT32_MAX, gemm_acc, qconv_acc, qconv_epilogue


@dataclass(frozen=True)
class BiasTarget:
    """What a QConv/QGemm's pre-activation should average per output channel on the calibration
    inputs: the float graph's `mean` (float units) over the accumulator's scales `acc_scale`,
    plus `offset` (accumulator steps: an unsigned output's zero point, compiler.quant.plan)."""

    mean: np.ndarray
    acc_scale: np.ndarray
    offset: np.ndarray | float = 0.0  # accumulator steps added to the target (an unsigned output's)


def correct_biases(
    graph: Graph, targets: Mapping[str, BiasTarget], inputs: Sequence[Mapping[str, np.ndarray]]
) -> Graph:
    """A copy of quantized `graph` whose QConv/QGemm nodes named (by output) in `targets` have
    biases that make their mean pre-activations on `inputs` those of the targets."""
    g = graph.copy()
    consts = {k: v.data for k, v in g.values.items() if v.data is not None}
    envs = [{**consts, **{k: np.asarray(v) for k, v in feeds.items()}} for feeds in inputs]
    last = last_uses(g)
    for i, node in enumerate(g.nodes):
        target = targets.get(node.outputs[0])
        accs: list[np.ndarray] = []
        if target is not None:
            accs = [_accumulator(node, [env[x] for x in node.inputs[:2]]) for env in envs]
            bias = _corrected(target, accs, envs[0][node.inputs[2]])
            g.values[node.inputs[2]] = const(node.inputs[2], bias)
            for env in envs:
                env[node.inputs[2]] = bias
        for j, env in enumerate(envs):
            arrays = [env[x] for x in node.inputs]
            if accs and node.op == "QConv":  # the accumulator is known: only the epilogue is left
                outs = [qconv_epilogue(accs[j], arrays, node.attrs)]
            else:
                outs = evaluate_node(g, node, arrays)
            env.update(zip(node.outputs, outs, strict=True))
            for name in last.get(i, ()):
                env.pop(name, None)
    return g


def _corrected(target: BiasTarget, accs: list[np.ndarray], bias_now: np.ndarray) -> np.ndarray:
    """The bias minus its mean error per channel (accumulator steps, rounded), from the
    accumulators `accs` (channels on axis 1) of each input."""
    axes = tuple(a for a in range(accs[0].ndim) if a != 1)
    acc_mean = np.mean([_channel_mean(a, axes) for a in accs], axis=0)
    bias = bias_now.astype(np.int64)
    error = acc_mean + bias - np.asarray(target.mean, np.float64) / target.acc_scale - target.offset
    return np.clip(bias - np.rint(error), -INT32_MAX, INT32_MAX).astype(np.int32)


def _channel_mean(acc: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`acc`'s float64 mean over `axes`, as numpy's mean of `acc` in float64 gives it: from the
    exact integer sum where every partial sum of int32 values is exact in float64 (fewer than
    2**22 of them), without converting `acc` first."""
    count = acc.size // acc.shape[1]
    if count > 1 << 22:
        return acc.astype(np.float64).mean(axis=axes)
    return np.true_divide(acc.sum(axis=axes, dtype=np.int64).astype(np.float64), count)


def _accumulator(node: Node, xs: Sequence[np.ndarray]) -> np.ndarray:
    """The int32 accumulator (before the bias) of a QConv or QGemm, channels on axis 1."""
    x, w = xs[:2]
    if node.op == "QConv":
        return qconv_acc(x, w, node.attrs, dtype=np.int32)
    return gemm_acc(x, w)
