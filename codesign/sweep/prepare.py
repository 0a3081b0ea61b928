"""A sweep's workloads, prepared once: exported from the zoo or read from an ONNX file, imported,
and quantized as `codesign compile` quantizes them (compiler.driver.compile_graph with the
default QuantOptions, calibrated on the zoo's own data for zoo models).

Quantization depends on the hardware in one way only: a shallow convolution (input channels at
most half of `block_in`) stays float on the host.  So a workload keeps one quantized graph per
set of shallow convolutions, made on first need (`Prepared.steps_for`): a sweep over block_in
8..32 quantizes ResNet-18 once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from codesign.run.inputs import Inputs, calibration_inputs, zoo_name
from codesign.sweep.operators import Step, graph_steps
from codesign.sweep.records import WorkloadSpec
from compiler.driver import DEFAULT_QUANT, float_layer_rule, is_qdq
from compiler.frontend import import_onnx
from compiler.frontend.onnx_load import Source
from compiler.frontend.rebatch import import_at_batch
from compiler.graph.ir import Graph, Node
from compiler.quant import quantize
from compiler.quant.fuse_residual import fuse_residual_adds
from compiler.quant.qdq import import_qdq

ShallowKey = tuple[int, ...]  # the input-channel counts of the convolutions left float


@dataclass
class Prepared:
    """One workload: its imported float graph, calibration inputs, and quantized steps by the
    set of shallow convolutions they were quantized for."""

    spec: WorkloadSpec
    graph: Graph
    calibration: list[Inputs]
    steps: dict[ShallowKey, list[Step]] = field(default_factory=dict)
    quantize_s: float = 0.0

    def shallow_key(self, block_in: int) -> ShallowKey:
        if is_qdq(self.graph):
            return ()
        convs = {self.graph.values[n.inputs[0]].shape[1] for n in self.graph.nodes if n.op == "Conv"}
        return tuple(sorted(c for c in convs if 2 * c <= block_in))

    def quantized(self, block_in: int) -> Graph:
        """The quantized graph for a core of this `block_in` (the one `steps_for` describes),
        for running the whole model (a confirmation on fsim and the RTL)."""
        return _quantize(self.graph, self.calibration, self.shallow_key(block_in))

    @property
    def batch(self) -> int:
        """The model's batch: its inputs' leading dimension (1 for an input of rank 0)."""
        dims = [self.graph.values[name].shape[:1] for name in self.graph.inputs]
        return max((d[0] for d in dims if d), default=1)

    @property
    def zoo_name(self) -> str | None:
        """The zoo model the workload names, whose sample inputs a run uses (None for a file)."""
        from codesign import zoo

        model = self.spec.model
        return model if model in zoo.names() and not Path(model).exists() else None

    def at_batch(self, batch: int) -> Prepared:
        """This workload imported at `batch` (compiler/frontend/rebatch.py: a batch-1 model run
        at a batch-2 core's padded batch), calibrated on each calibration input repeated to the
        batch, so that its quantized layers are this workload's at that batch (the same scales,
        shifts and multipliers).  Raises ModelImportError when the model cannot be re-batched."""
        if batch == self.batch:
            return self
        source, _ = _source(self.spec)
        graph = import_at_batch(source, batch, self.spec.shapes())
        return Prepared(self.spec, graph, [stack([c], batch) for c in self.calibration])

    def samples_at(self, batch: int, seed: int) -> Inputs:
        """Distinct seeded samples of this workload (at its own batch) stacked to `batch`."""
        from codesign.run.inputs import sample_inputs

        count = -(-batch // self.batch)
        return stack(sample_inputs(self.graph, self.zoo_name, count, seed), batch)

    def steps_for(self, block_in: int) -> list[Step]:
        """The quantized graph's steps for a core of this `block_in` (quantized on first need)."""
        key = self.shallow_key(block_in)
        if key not in self.steps:
            start = time.perf_counter()
            self.steps[key] = graph_steps(_quantize(self.graph, self.calibration, key))
            self.quantize_s += time.perf_counter() - start
        return self.steps[key]


def prepare(spec: WorkloadSpec, block_ins: tuple[int, ...] = (16,)) -> Prepared:
    """Import `spec`'s model and quantize it for the cores of these `block_in`s."""
    graph, name = _import(spec)
    prepared = Prepared(spec, graph, calibration_inputs(graph, name, DEFAULT_QUANT.calibration_count))
    for block_in in block_ins:
        prepared.steps_for(block_in)
    return prepared


def stack(samples: list[Inputs], batch: int) -> Inputs:
    """`samples` concatenated on axis 0, repeated as needed and cut to `batch` rows."""
    out = {}
    for name in samples[0]:
        rows = np.concatenate([s[name] for s in samples])
        reps = -(-batch // len(rows))
        out[name] = np.concatenate([rows] * reps)[:batch]
    return out


def _import(spec: WorkloadSpec) -> tuple[Graph, str | None]:
    """The float graph and its zoo name (None for a file not exported from the zoo)."""
    source, name = _source(spec)
    return import_onnx(source, spec.shapes()), name  # its errors name the file


def _source(spec: WorkloadSpec) -> tuple[Source, str | None]:
    """The workload's model (the zoo's, built, or the file's path) and its zoo name."""
    from codesign import zoo

    if spec.model in zoo.names() and not Path(spec.model).exists():
        return zoo.build(spec.model), spec.model
    return spec.model, zoo_name(Path(spec.model).read_bytes()) if Path(spec.model).exists() else None


def _quantize(graph: Graph, calibration: list[Inputs], shallow: ShallowKey) -> Graph:
    """compiler.driver.compile_graph's quantization, shallow convolutions (those of `shallow`'s
    channel counts) kept float."""
    if is_qdq(graph):
        return import_qdq(graph, calibration, precise=True)

    def keep_shallow(g: Graph, node: Node) -> bool:
        return node.op in ("QConv", "Conv") and g.values[node.inputs[0]].shape[1] in shallow

    q = DEFAULT_QUANT
    keep = float_layer_rule(graph, q.float_layers, keep_shallow)
    quantized = quantize(graph, calibration, method=q.calibration, rounding=q.rounding,
                         bias_correction=q.bias_correction, keep_float=keep)
    return fuse_residual_adds(quantized)


__all__ = ["Prepared", "ShallowKey", "prepare", "stack"]
