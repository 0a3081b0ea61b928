"""How close a quantized graph comes to its reference: cosine similarity, top-1 agreement (with
its 95% confidence interval), root-mean-square and largest error against onnxruntime fp32;
agreement within one quantization step against onnxruntime's int8 execution of a QDQ file;
classification accuracy on labelled data.

A top-1 agreement over a hundred inputs is a count of coin tosses where the reference's best two
classes are nearly tied: with 1000 random-weight classes, the zoo's MobileNetV2 has 10 of its
first 100 inputs within 0.1 logit of a tie (the logits' spread is 3.3), and any int8 error flips
about half of those. The Wilson interval says how far such a count can be trusted; the rms error
is the steadier measure of the quantization itself.

The quantized graph runs in the reference interpreter (`run_graph`), which evaluates the
integer ops exactly: these figures are those of the workbench's integer reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from compiler.graph.interp import run_graph
from compiler.graph.ir import Graph

if TYPE_CHECKING:  # onnxruntime is imported by the first session: a compile never starts one
    import onnxruntime as ort

Inputs = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Agreement:
    """Candidate outputs against reference outputs over `count` inputs (first output each)."""

    count: int
    cosine_mean: float
    cosine_min: float
    top1: float
    max_abs_err: float
    rms_err: float  # over every element of every output
    top1_ci95: tuple[float, float]  # Wilson score interval of `top1`

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StepAgreement:
    """Int8 outputs (dequantized) against another int8 execution's, in quantization steps."""

    count: int
    cosine_mean: float
    cosine_min: float
    within_one_step: float  # fraction of elements with |difference| <= one step
    exact: float  # fraction of elements that are equal

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two arrays read as flat vectors (float64); 1.0 for two zero vectors."""
    x, y = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    if norms == 0.0:
        return 1.0 if not x.any() and not y.any() else 0.0
    return float(x @ y / norms)


def agreement(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray]) -> Agreement:
    """Per-input cosine (mean and min), top-1 agreement (argmax of each flattened output) with
    its 95% Wilson interval, and the root-mean-square and largest absolute errors."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError(f"need equally many outputs, at least one: {len(reference)} and {len(candidate)}")
    pairs = [(np.ravel(r).astype(np.float64), np.ravel(c).astype(np.float64))
             for r, c in zip(reference, candidate, strict=True)]
    cos = [cosine(r, c) for r, c in pairs]
    hits = sum(int(np.argmax(r)) == int(np.argmax(c)) for r, c in pairs)
    err = np.concatenate([c - r for r, c in pairs])
    return Agreement(len(cos), float(np.mean(cos)), float(np.min(cos)), hits / len(cos),
                     float(np.max(np.abs(err))), float(np.sqrt(np.mean(err**2))),
                     wilson_interval(hits, len(cos)))


def wilson_interval(hits: int, count: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion `hits` / `count` (z = 1.96: 95%): the values p
    for which |hits / count - p| <= z * sqrt(p (1 - p) / count). Unlike p +- z * its standard
    error, it stays inside [0, 1] and is not empty at 0 or `count` hits."""
    if count < 1 or not 0 <= hits <= count:
        raise ValueError(f"need 0 <= hits <= count and count >= 1, not {hits} of {count}")
    p, z2 = hits / count, z * z / count
    center = (p + z2 / 2) / (1 + z2)
    half = math.sqrt(p * (1 - p) / count + z2 / (4 * count)) * z / (1 + z2)
    # exactly 0 and 1 at no and all hits, where the float sums may land an ulp inside
    return (0.0 if hits == 0 else center - half), (1.0 if hits == count else center + half)


def step_agreement(
    reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray], step: float
) -> StepAgreement:
    """Agreement of two int8 executions whose outputs are multiples of `step` (the output scale)."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError(f"need equally many outputs, at least one: {len(reference)} and {len(candidate)}")
    cos = [cosine(r, c) for r, c in zip(reference, candidate, strict=True)]
    diffs = np.concatenate(
        [
            np.abs(np.ravel(r).astype(np.float64) - np.ravel(c)) / step
            for r, c in zip(reference, candidate, strict=True)
        ]
    )
    # differences are whole steps up to float rounding of the dequantized values
    steps = np.rint(diffs)
    return StepAgreement(
        len(cos),
        float(np.mean(cos)),
        float(np.min(cos)),
        float(np.mean(steps <= 1)),
        float(np.mean(steps == 0)),
    )


def ort_session(model: onnx.ModelProto | bytes | str, threads: int = 1) -> ort.InferenceSession:
    """A CPU onnxruntime session on `threads` threads (0: onnxruntime's default; results do not
    depend on the thread count). QuantizeLinear/DequantizeLinear pairs run as written
    (DequantizeLinear -> float op -> QuantizeLinear), not fused into onnxruntime's int8 kernels:
    on x86 CPUs without VNNI those sum u8 x s8 products in pairs with int16 saturation, so their
    results depend on the CPU (a QDQ ResNet's cosine to fp32 fell from 0.9999 to 0.90 on an
    AVX2-only EPYC). Float models are unaffected."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def ort_outputs(session: ort.InferenceSession, inputs: Sequence[Inputs]) -> list[np.ndarray]:
    """onnxruntime's first output for each input dict."""
    return [session.run(None, dict(x))[0] for x in inputs]


def graph_outputs(graph: Graph, inputs: Sequence[Inputs]) -> list[np.ndarray]:
    """The graph's first output for each input dict (reference interpreter)."""
    return [run_graph(graph, x)[graph.outputs[0]] for x in inputs]


def output_step(graph: Graph) -> float:
    """The quantization step of a graph's first output: the scale of the Dequantize writing it."""
    producer = graph.producer(graph.outputs[0])
    if producer is None or producer.op != "Dequantize":
        raise ValueError(f"graph output {graph.outputs[0]} is not written by a Dequantize")
    return producer.float_attr("scale")


def classification_accuracy(graph: Graph, images: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of `images` (batch-1 slices of [n, ...]) whose argmax equals the label."""
    name = graph.inputs[0]
    hits = [int(np.argmax(run_graph(graph, {name: image[None]})[graph.outputs[0]])) == int(label)
            for image, label in zip(images, labels, strict=True)]
    return float(np.mean(hits))


@dataclass(frozen=True)
class LabelAccuracy:
    """Top-1 and top-5 accuracy of classifier outputs against labels over `count` samples, each
    with its 95% Wilson interval (top-5 is None for fewer than 5 classes)."""

    count: int
    top1: float
    top1_ci95: tuple[float, float]
    top5: float | None
    top5_ci95: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def label_accuracy(outputs: Sequence[np.ndarray], labels: Sequence[int] | np.ndarray) -> LabelAccuracy:
    """How often each output's best class (top-1), or one of its best five (top-5), is the label."""
    if len(outputs) != len(labels) or not len(outputs):
        raise ValueError(f"need one label per output, at least one: {len(outputs)} outputs, "
                         f"{len(labels)} labels")
    flat = [np.ravel(o).astype(np.float64) for o in outputs]
    classes = flat[0].size
    ranks = [int(np.sum(o > o[int(y)])) if 0 <= int(y) < o.size else classes
             for o, y in zip(flat, labels, strict=True)]
    top1 = sum(r == 0 for r in ranks)
    count = len(ranks)
    if classes < 5:
        return LabelAccuracy(count, top1 / count, wilson_interval(top1, count), None, None)
    top5 = sum(r < 5 for r in ranks)
    return LabelAccuracy(count, top1 / count, wilson_interval(top1, count), top5 / count,
                         wilson_interval(top5, count))
