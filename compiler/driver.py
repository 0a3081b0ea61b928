"""The compiler's one entry point for whole models: an ONNX file -> graph IR -> quantized graph
(calibrated on the inputs the caller supplies, or the file's own scales for a QDQ model) ->
a `CompiledModel` for a target.  The caller decides where calibration data comes from (the
command line uses the zoo's data for zoo models); nothing here knows about the zoo."""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.frontend import import_onnx
from compiler.graph.ir import Graph, Node
from compiler.graph.passes import simplify
from compiler.graph.passes.lower_conv_transpose import lower_conv_transpose
from compiler.graph.passes.split_groups import split_groups
from compiler.quant import quantize
from compiler.quant.fuse_residual import fuse_residual_adds
from compiler.quant.qdq import import_qdq
from compiler.quant.static import DEFAULT_ROUNDING, dense_layers
from compiler.runtime.accel import KnobsFor
from compiler.runtime.cpu_model import CpuModel
from compiler.runtime.model import CompiledModel, is_shallow
from compiler.target import AcceleratorTarget
from hw.errors import InputError

Inputs = dict[str, np.ndarray]
# where calibration inputs come from: the imported graph (its inputs' shapes) -> the inputs
CalibrationSource = Callable[[Graph], Sequence[Inputs]]
KeepRule = Callable[[Graph, Node], bool]
CALIBRATION_COUNT = 16
PRECISIONS = ("fp32", "int8")  # what the CPU target runs


@dataclass(frozen=True)
class QuantOptions:
    """How a float ONNX model is quantized: `calibration` (the activation calibrator) on
    `calibration_count` inputs, `rounding` and `bias_correction` as `quantize` takes them (its
    defaults: GPTQ convolution weights, corrected biases; "nearest" without correction quantizes
    ResNet-18 in half the time, less accurately: see the README), and `float_layers`: patterns
    (fnmatch, on the ONNX node's name or its output's) of convolutions and dense layers that
    stay float and run on the host, trading offloaded MACs for int8 error."""

    calibration: str = "percentile"
    calibration_count: int = CALIBRATION_COUNT
    rounding: str = DEFAULT_ROUNDING
    bias_correction: bool = True
    float_layers: tuple[str, ...] = ()


DEFAULT_QUANT = QuantOptions()

def compile_onnx(path: str | Path, target: AcceleratorTarget, calibration: CalibrationSource, *,
                 input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                 quant: QuantOptions = DEFAULT_QUANT, knobs_for: KnobsFor | None = None,
                 offload_shallow: bool = False) -> CompiledModel:
    """The ONNX model at `path` imported (its errors name the file) and compiled by
    `compile_graph` on the calibration inputs `calibration(graph)`."""
    graph = import_onnx(str(path), input_shapes)
    return compile_graph(graph, target, calibration(graph), quant=quant, knobs_for=knobs_for,
                         offload_shallow=offload_shallow, where=str(path))


def compile_graph(graph: Graph, target: AcceleratorTarget, calibration: Sequence[Inputs], *,
                  quant: QuantOptions = DEFAULT_QUANT, knobs_for: KnobsFor | None = None,
                  offload_shallow: bool = False, where: str | None = None) -> CompiledModel:
    """An imported float graph quantized as `quant` says on the `calibration` inputs (a QDQ
    graph keeps its own scales) and compiled for `target`; with `knobs_for`, each accelerator
    operator uses the schedule it returns (else its default); `offload_shallow` puts shallow
    convolutions on the accelerator too (compiler.runtime.model); errors name the model as
    `where` (its file), else by the graph's name."""
    qgraph = quantize_graph(graph, calibration, quant=quant, target=target, offload_shallow=offload_shallow,
                            where=where)
    return CompiledModel.compile(qgraph, target, knobs_for=knobs_for, offload_shallow=offload_shallow)


def quantize_graph(graph: Graph, calibration: Sequence[Inputs], *, quant: QuantOptions = DEFAULT_QUANT,
                   target: AcceleratorTarget | None = None, offload_shallow: bool = False,
                   where: str | None = None) -> Graph:
    """The int8 graph `compile_graph` compiles for `target` (a QDQ graph with its own scales;
    a float one quantized as `quant` says, shallow convolutions kept float unless
    `offload_shallow` or without a `target`), for any target that runs it: the CPU target runs
    this same graph, so its int8 results are the accelerator's."""
    calib = list(calibration)
    for name in graph.inputs:  # an empty input: nothing to calibrate on (the graph passes need data)
        shape = graph.values[name].shape
        if 0 in shape:
            raise InputError(f"{where or graph.name}: input {name!r} has shape {list(shape)}; quantization "
                             "needs inputs with data (no zero-sized dimension)")
    # a model quantized already keeps the file's scales (and onnxruntime's rounding between a
    # convolution and its residual add); calibration then only bounds accumulators
    if is_qdq(graph):  # requantized as precisely as onnxruntime, whose int8 results it should match
        if quant.float_layers:
            raise InputError(f"{where or graph.name} is quantized already (QuantizeLinear/DequantizeLinear): "
                             "--float-layers applies to a float model")
        qgraph = import_qdq(graph, calib, precise=True)
    else:
        if target is not None:  # grouped and transposed convolutions as convolutions it runs
            graph = split_groups(lower_conv_transpose(simplify(graph)), target.block_in)
        # a shallow convolution that stays on the host stays float there: int8 buys it nothing
        shallow = None if offload_shallow or target is None else functools.partial(is_shallow, target=target)
        keep = float_layer_rule(graph, quant.float_layers, shallow)
        quantized = quantize(graph, calib, method=quant.calibration, rounding=quant.rounding,
                             bias_correction=quant.bias_correction, keep_float=keep)
        qgraph = fuse_residual_adds(quantized)
    return qgraph


def compile_cpu(graph: Graph, precision: str, calibration: Sequence[Inputs] = (), *,
                quant: QuantOptions = DEFAULT_QUANT, shallow_target: AcceleratorTarget | None = None,
                threads: int = 1, where: str | None = None,
                tuned: Mapping[str, Mapping[str, Any]] | None = None) -> CpuModel:
    """An imported graph on the host CPU, every operator native: "fp32" runs the float graph as
    imported (simplified), "int8" the graph `quantize_graph` writes for `shallow_target`'s
    accelerator from `calibration` (the same one the accelerator runs); `threads` kernels per
    splittable step (compiler.runtime.cpu_model); `tuned`: convolution schedules by
    compiler.tune.cpu's key (read_log), the defaults elsewhere."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "fp32":
        if is_qdq(graph):
            raise InputError(f"{where or graph.name} is quantized already (QuantizeLinear/DequantizeLinear): "
                             "run it at precision int8")
        return CpuModel.compile(simplify(graph), threads=threads, tuned=tuned)
    qgraph = quantize_graph(graph, calibration, quant=quant, target=shallow_target, where=where)
    return CpuModel.compile(qgraph, threads=threads, tuned=tuned)


def float_layer_rule(graph: Graph, patterns: Sequence[str], also: KeepRule | None = None,
                     option: str = "--float-layers") -> KeepRule | None:
    """`quantize`'s keep_float for the layers of `graph` whose node or output name matches one
    of `patterns` (fnmatch), or for which `also` holds; None when neither keeps any. Every
    pattern must match a convolution or dense layer of the graph as `quantize` cleans it (the
    error names the `option` that gave it)."""
    nodes = dense_layers(simplify(graph))
    layers = [n.name for n in nodes]
    for pattern in patterns:
        if not any(_named(n, pattern) for n in nodes):
            shown = ", ".join(layers[:3]) + (", ..." if len(layers) > 3 else "")
            raise InputError(f"{option} {pattern!r} matches no convolution or dense layer of "
                             f"{graph.name} (its {len(layers)} layers: {shown})")
    if not patterns:
        return also

    def keep(g: Graph, node: Node) -> bool:
        return any(_named(node, p) for p in patterns) or bool(also and also(g, node))

    return keep


def _named(node: Node, pattern: str) -> bool:
    return fnmatch.fnmatchcase(node.name, pattern) or fnmatch.fnmatchcase(node.outputs[0], pattern)


def is_qdq(graph: Graph) -> bool:
    """Whether the model was quantized already (QuantizeLinear/DequantizeLinear pairs)."""
    return any(n.op in ("QuantizeLinear", "DequantizeLinear") for n in graph.nodes)
