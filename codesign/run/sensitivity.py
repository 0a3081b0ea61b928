"""What keeping each convolution or dense layer of a float model float would buy
(`codesign sensitivity`): the rms logit error against onnxruntime fp32 with that layer float
too, ranked by gain, as a `SensitivityReport`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from codesign.run.data import UserData
from codesign.run.device import OnnxRuntimeDevice
from codesign.run.inputs import calibration_inputs, sample_inputs, zoo_name
from compiler.driver import DEFAULT_QUANT, QuantOptions, float_layer_rule, is_qdq
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph
from compiler.graph.passes import simplify
from compiler.quant.sensitivity import float_layer_gains
from compiler.quant.static import calibrate, dense_layers
from compiler.runtime.model import is_shallow, node_macs
from compiler.target import AcceleratorTarget
from hw.config import AcceleratorConfig
from hw.errors import InputError


@dataclass(frozen=True)
class SensitivityRow:
    """One candidate: a layer (or a --groups pattern's layers) kept float too."""

    layer: str
    layers: list[str]
    macs: int
    macs_fraction: float
    rms_err: float
    gain: float


@dataclass(frozen=True)
class SensitivityReport:
    model: str
    config: str
    inputs: int
    float_already: list[str]
    baseline_rms_err: float
    layers: list[SensitivityRow]  # by gain, best first

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


SENSITIVITY_SEED = 5000  # neither calibration (1000, ...) nor the evaluation inputs (0, 1, ...)


def sensitivity(path: str, cfg: AcceleratorConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                quant: QuantOptions = DEFAULT_QUANT, offload_shallow: bool = False, count: int = 20,
                layer_patterns: Sequence[str] = (), group_patterns: Sequence[str] = (),
                progress: Callable[[int, int], None] | None = None,
                user: UserData | None = None) -> SensitivityReport:
    """What keeping each convolution or dense layer of a float ONNX model float would buy
    (compiler.quant.sensitivity): its rms logit error against onnxruntime fp32 over `count`
    seeded inputs (or the user's first `count` evaluation samples) with that layer float too,
    quantized as `load_model` quantizes it; only the
    layers matching `layer_patterns` (as --float-layers matches) when given; with
    `group_patterns`, each pattern's layers together instead. Rows by gain."""
    if path.endswith(".cmodel"):
        raise InputError(f"{path}: sensitivity quantizes the float model; give its ONNX file")
    graph = import_onnx(path, input_shapes)
    data = Path(path).read_bytes()
    if is_qdq(graph):
        raise InputError(f"{path} is quantized already (QuantizeLinear/DequantizeLinear): sensitivity "
                         "applies to a float model")
    name = zoo_name(data)
    shallow = None if offload_shallow else functools.partial(is_shallow, target=AcceleratorTarget(cfg))
    keep = float_layer_rule(graph, quant.float_layers, shallow)
    cleaned = simplify(graph)  # the layers as quantize sees them; the patterns are checked before calibrating
    layers = _matching(graph, cleaned, layer_patterns, "--layers") if layer_patterns else None
    groups = {p: _matching(graph, cleaned, [p], "--groups") for p in group_patterns} or None
    evaluation = user.load_evaluation(graph) if user else None  # checked before calibrating
    source = user.calibration if user else None
    calibration = calibration_inputs(graph, name, quant.calibration_count, source)
    calibrated = calibrate(graph, calibration, quant.rounding)
    g = calibrated.graph
    inputs = evaluation.samples[:count] if evaluation else sample_inputs(graph, name, count, SENSITIVITY_SEED)
    count = len(inputs)
    fp32 = OnnxRuntimeDevice(data)
    references = [fp32.infer(x).outputs[fp32.output_names[0]] for x in inputs]
    result = float_layer_gains(calibrated, inputs, references, keep, layers, progress,
                               method=quant.calibration, bias_correction=quant.bias_correction,
                               groups=groups)
    macs = {n.name: node_macs(g, n) for n in dense_layers(g)}
    total = max(sum(macs.values()), 1)
    ranked = sorted(result.layers, key=result.gain, reverse=True)
    rows = [SensitivityRow(layer=e.name, layers=list(e.layers), macs=sum(macs[n] for n in e.layers),
                           macs_fraction=sum(macs[n] for n in e.layers) / total, rms_err=e.rms_err,
                           gain=result.gain(e)) for e in ranked]
    return SensitivityReport(model=graph.name, config=cfg.name, inputs=count,
                             float_already=result.float_already, baseline_rms_err=result.baseline_rms_err,
                             layers=rows)


def _matching(graph: Graph, cleaned: Graph, patterns: Sequence[str], option: str) -> set[str]:
    """The dense layers of `cleaned` (`graph` simplified) that `patterns` match; each must match one."""
    rule = float_layer_rule(graph, patterns, option=option)
    return {n.name for n in dense_layers(cleaned) if rule is not None and rule(cleaned, n)}


def print_sensitivity(report: SensitivityReport, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call: a test may have replaced it
    print(f"{report.model}: rms error {report.baseline_rms_err:.4f} over {report.inputs} inputs; "
          f"float already: {', '.join(report.float_already) or 'none'}", file=out)
    print(f"{'float too':32} {'MACs':>7} {'rms error':>10} {'gain':>8}", file=out)
    for r in report.layers:
        print(f"{r.layer[:32]:32} {r.macs_fraction:7.2%} {r.rms_err:10.4f} {r.gain:8.4f}", file=out)
