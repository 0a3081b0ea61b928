"""`codesign bench zoo-accuracy`: how close the zoo's int8 models come to fp32 over many inputs.

For each model: imported, quantized as `codesign compile` quantizes it (the zoo's own calibration
data: digits on its training split, EfficientNet-Lite1 on the calibration photos, the seeded
models on their seeded images), then the integer reference (what every backend computes
exactly) against onnxruntime fp32 over `count` inputs the calibration never saw: top-1
agreement with its 95% Wilson interval, cosine and rms error; for digits, top-1/top-5 accuracy
of both against the held-out labels. MobileNetV2 and ResNet-18 have seeded weights, so their
agreement counts near-ties too (compiler.quant.accuracy's module doc); EfficientNet-Lite1 and
digits are trained.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from codesign import zoo
from codesign.run.inputs import calibration_inputs
from compiler.driver import DEFAULT_QUANT, quantize_graph
from compiler.frontend import import_onnx
from compiler.quant.accuracy import agreement, graph_outputs, label_accuracy, ort_outputs, ort_session
from compiler.target import AcceleratorTarget
from hw.config import AcceleratorConfig

MODELS = ("digits", "efficientnet-lite1", "mobilenetv2", "resnet18")


@dataclass(frozen=True)
class ZooAccuracyRow:
    model: str
    inputs: int
    calibration_inputs: int
    top1_agreement: float
    top1_ci95: tuple[float, float]
    cosine_mean: float
    cosine_min: float
    rms_err: float
    fp32_accuracy: dict[str, Any] | None  # against labels (digits)
    int8_accuracy: dict[str, Any] | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ZooAccuracyReport:
    config: str
    rows: list[ZooAccuracyRow]

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "rows": [r.to_json() for r in self.rows]}


def run(cfg: AcceleratorConfig, models: tuple[str, ...] = MODELS, count: int = 400,
        progress: Callable[[int, int], None] | None = None) -> ZooAccuracyReport:
    """One row per model in `models`, over `count` evaluation inputs each."""
    rows = []
    for i, name in enumerate(models):
        rows.append(_row(name, cfg, count))
        if progress:
            progress(i + 1, len(models))
    return ZooAccuracyReport(cfg.name, rows)


def _row(name: str, cfg: AcceleratorConfig, count: int) -> ZooAccuracyRow:
    start = time.perf_counter()
    model = zoo.build(name)
    graph = import_onnx(model)
    calibration = calibration_inputs(graph, name, DEFAULT_QUANT.calibration_count)
    qgraph = quantize_graph(graph, calibration, target=AcceleratorTarget(cfg))
    inputs = zoo.sample_inputs(name, count, seed=0)
    fp32 = ort_outputs(ort_session(model), inputs)
    int8 = graph_outputs(qgraph, inputs)
    fit = agreement(fp32, int8)
    labels = None
    if name == "digits":  # its samples wrap around the held-out split
        held_out = zoo.digits_split().test_labels
        labels = [int(held_out[i % len(held_out)]) for i in range(count)]
    return ZooAccuracyRow(
        name, count, len(calibration), fit.top1, fit.top1_ci95, fit.cosine_mean, fit.cosine_min, fit.rms_err,
        None if labels is None else label_accuracy(fp32, labels).to_dict(),
        None if labels is None else label_accuracy(int8, labels).to_dict(),
        time.perf_counter() - start)
