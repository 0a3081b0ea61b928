"""Which layers' int8 error costs the most: each convolution or dense layer kept float in turn.

`float_layer_gains` quantizes a calibrated graph as asked (the baseline), then once more for
each candidate layer with that layer kept float as well (`quantize_calibrated`: one
calibration serves every version), runs each version on the evaluation inputs in the reference
interpreter and measures the rms error of its first output against `references` (onnxruntime
fp32, say). A layer's gain is the baseline's rms error minus its own: what keeping it float on
the host (`codesign run --float-layers`) buys. It can be negative: the int8 values around a
float layer lose the codings that only integer readers and writers allow (per-channel scales, a
zero point), since a float op reads a value dequantized with one scale. On MobileNetV2, block
1's projection kept float alone raises the rms error from 0.200 to 0.303, while the whole block
kept float lowers it. Where no such coding changes, the layers' rounding errors are nearly
independent and their squares (mean squared errors) roughly add.

On MobileNetV2 (20 inputs) the cost is one lowering, bias correction included, and 20
interpreter runs per layer: about 4-7 s each on this project's machine, minutes in all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.quant.accuracy import graph_outputs
from compiler.quant.errors import QuantizationError
from compiler.quant.fuse_residual import fuse_residual_adds
from compiler.quant.static import DEFAULT_METHOD, DENSE_OPS, Calibrated, dense_layers, quantize_calibrated

KeepRule = Callable[[Graph, Node], bool]


@dataclass(frozen=True)
class LayerGain:
    """One candidate: its name (a layer's node name, or a group's label), the node names of
    its layers, and the rms error with them float too."""

    name: str
    layers: tuple[str, ...]
    rms_err: float


@dataclass(frozen=True)
class Sensitivity:
    """The baseline's rms error, the dense layers it leaves float (kept, or float by the
    quantizer's own rules, as a classifier whose output is the graph's), and each candidate's
    rms error (`layers`, in graph order)."""

    baseline_rms_err: float
    float_already: list[str]
    layers: list[LayerGain] = field(default_factory=list)

    def gain(self, entry: LayerGain) -> float:
        return self.baseline_rms_err - entry.rms_err


def float_layer_gains(
    calibrated: Calibrated,
    inputs: Sequence[Mapping[str, np.ndarray]],
    references: Sequence[np.ndarray],
    keep_float: KeepRule | None = None,
    layers: Collection[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    method: str = DEFAULT_METHOD,
    bias_correction: bool = True,
    groups: Mapping[str, Collection[str]] | None = None,
) -> Sensitivity:
    """The rms error of the graph quantized with `keep_float`, `method` and `bias_correction`
    (`quantize_calibrated`'s; residual adds fused, as `codesign run` does) on `inputs` against
    `references` (the float model's first output for each), and the same with each candidate
    also float: each dense layer, or those whose node names are in `layers`; or, with `groups`
    (label -> node names), each group's layers together (a whole block keeps its int8
    neighbours' codings, which a single float layer can cost them). Layers the baseline leaves
    float are no candidates. `progress(done, total)` is called after each version."""
    graph = calibrated.graph
    named = [*(layers or ()), *(n for group in (groups or {}).values() for n in group)]
    unknown = sorted(set(named) - {n.name for n in dense_layers(graph)})
    if unknown:
        raise QuantizationError(f"{unknown[0]} is no convolution or dense layer of {graph.name}")
    if len(inputs) != len(references) or not inputs:
        raise QuantizationError(
            f"need one reference per input, at least one: {len(references)} for {len(inputs)}"
        )
    want = [np.asarray(r, np.float64) for r in references]

    def version(extra: Collection[str]) -> Graph:
        def keep(g: Graph, node: Node) -> bool:
            return node.name in extra or bool(keep_float and keep_float(g, node))

        quantized = quantize_calibrated(calibrated, method, bias_correction=bias_correction, keep_float=keep)
        return fuse_residual_adds(quantized)

    def rms(quantized: Graph) -> float:
        got = graph_outputs(quantized, inputs)
        squares = [np.mean((np.asarray(o, np.float64) - r) ** 2) for o, r in zip(got, want, strict=True)]
        return float(np.sqrt(np.mean(squares)))

    baseline = version(())
    floats = {n.outputs[0] for n in baseline.nodes if n.op in DENSE_OPS}  # kept, or float by the rules
    open_layers = [n.name for n in dense_layers(graph) if n.outputs[0] not in floats]
    candidates: list[tuple[str, tuple[str, ...]]]
    if groups is None:
        candidates = [(n, (n,)) for n in open_layers if layers is None or n in layers]
    else:
        grouped = [(label, tuple(n for n in open_layers if n in group)) for label, group in groups.items()]
        candidates = [(label, members) for label, members in grouped if members]
    total = len(candidates) + 1
    result = Sensitivity(rms(baseline), sorted(n.name for n in dense_layers(graph) if n.outputs[0] in floats))
    if progress:
        progress(1, total)
    for i, (name, members) in enumerate(candidates):
        result.layers.append(LayerGain(name, members, rms(version(members))))
        if progress:
            progress(i + 2, total)
    return result
