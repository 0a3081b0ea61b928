"""Whole models: ONNX -> quantized graph -> CompiledModel, runs on a backend, and the figures of
`codesign run` (exactness against the integer reference, agreement with onnxruntime fp32,
cycles and where they go)."""

from __future__ import annotations

import fnmatch
import functools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.codegen.cpu import cache_info
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph, Node
from compiler.graph.passes import simplify
from compiler.quant import quantize
from compiler.quant.accuracy import Agreement, agreement
from compiler.quant.fuse_residual import fuse_residual_adds
from compiler.quant.qdq import import_qdq
from compiler.quant.sensitivity import float_layer_gains
from compiler.quant.static import DEFAULT_ROUNDING, calibrate, dense_layers
from compiler.runtime import serialize
from compiler.runtime.model import CompiledModel, ModelResult, is_shallow, node_macs, reference_boundary
from compiler.target import AcceleratorTarget
from hw.config import AcceleratorConfig

Inputs = dict[str, np.ndarray]
CALIBRATION_COUNT = 16
CALIBRATION_SEED = 1000  # calibration never sees the evaluation inputs (seeds 0, 1, ...)


@dataclass
class Loaded:
    model: CompiledModel
    onnx_bytes: bytes | None  # the float model, for the fp32 reference
    zoo_name: str | None
    compile_s: float
    kernels_from_disk: int  # host kernels loaded from the disk cache, not compiled


@dataclass(frozen=True)
class QuantOptions:
    """How `load_model` quantizes a float ONNX model: `calibration` (the activation calibrator)
    on `calibration_count` inputs, `rounding` and `bias_correction` as `quantize` takes them (its
    defaults: GPTQ convolution weights, corrected biases; "nearest" without correction quantizes
    ResNet-18 in half the time, less accurately: see the README), and `float_layers`: patterns
    (fnmatch, on the ONNX node's name or its output's) of convolutions and dense layers that
    stay float and run on the host, trading offloaded MACs for int8 error."""

    calibration: str = "percentile"
    calibration_count: int = CALIBRATION_COUNT
    rounding: str = DEFAULT_ROUNDING
    bias_correction: bool = True
    float_layers: tuple[str, ...] = ()


def load_model(path: str, cfg: AcceleratorConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
               quant: QuantOptions = QuantOptions(), tuning_log: str | None = None,
               offload_shallow: bool = False) -> Loaded:
    """A CompiledModel from an ONNX file (imported, quantized on calibration inputs as `quant`
    says, compiled) or from a .cmodel file; with `tuning_log`, each accelerator operator uses
    the fastest schedule the log holds for it on this config, else its default;
    `offload_shallow` puts shallow convolutions on the accelerator too
    (compiler.runtime.model). Host kernels come from the disk cache where it has them
    (compiler.codegen.cpu.jit); `Loaded.kernels_from_disk` counts them."""
    start = time.perf_counter()
    before = cache_info().from_disk
    knobs_for = _from_log(tuning_log)
    if path.endswith(".cmodel"):
        if quant.float_layers:
            raise ValueError(f"{path} is compiled already: --float-layers applies when compiling "
                             "an ONNX model")
        model, extra = serialize.load(path, knobs_for)
        onnx_path = extra.get("onnx")
        data = Path(onnx_path).read_bytes() if onnx_path and Path(onnx_path).exists() else None
        name = extra.get("zoo")
    else:
        graph = import_onnx(path, input_shapes)  # its errors name the file
        data = Path(path).read_bytes()
        name = zoo_name(data)
        calib = calibration_inputs(graph, name, quant.calibration_count)
        target = AcceleratorTarget(cfg)
        # a model quantized already keeps the file's scales (and onnxruntime's rounding between a
        # convolution and its residual add); calibration then only bounds accumulators
        if is_qdq(graph):  # requantized as precisely as onnxruntime, whose int8 results it should match
            if quant.float_layers:
                raise ValueError(f"{path} is quantized already (QuantizeLinear/DequantizeLinear): "
                                 "--float-layers applies to a float model")
            qgraph = import_qdq(graph, calib, precise=True)
        else:
            # a shallow convolution that stays on the host stays float there: int8 buys it nothing
            shallow = None if offload_shallow else functools.partial(is_shallow, target=target)
            keep = float_layer_rule(graph, quant.float_layers, shallow)
            quantized = quantize(graph, calib, method=quant.calibration, rounding=quant.rounding,
                                 bias_correction=quant.bias_correction, keep_float=keep)
            qgraph = fuse_residual_adds(quantized)
        model = CompiledModel.compile(qgraph, target, knobs_for=knobs_for, offload_shallow=offload_shallow)
    return Loaded(model, data, name, time.perf_counter() - start, cache_info().from_disk - before)


KeepRule = Callable[[Graph, Node], bool]


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
            raise ValueError(f"{option} {pattern!r} matches no convolution or dense layer of "
                             f"{graph.name} (its {len(layers)} layers: {shown})")
    if not patterns:
        return also

    def keep(g: Graph, node: Node) -> bool:
        return any(_named(node, p) for p in patterns) or bool(also and also(g, node))

    return keep


def _named(node: Node, pattern: str) -> bool:
    return fnmatch.fnmatchcase(node.name, pattern) or fnmatch.fnmatchcase(node.outputs[0], pattern)


SENSITIVITY_SEED = 5000  # neither calibration (1000, ...) nor the evaluation inputs (0, 1, ...)


def sensitivity(path: str, cfg: AcceleratorConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                quant: QuantOptions = QuantOptions(), offload_shallow: bool = False, count: int = 20,
                layer_patterns: Sequence[str] = (), group_patterns: Sequence[str] = (),
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """What keeping each convolution or dense layer of a float ONNX model float would buy
    (compiler.quant.sensitivity): its rms logit error against onnxruntime fp32 over `count`
    seeded inputs with that layer float too, quantized as `load_model` quantizes it; only the
    layers matching `layer_patterns` (as --float-layers matches) when given; with
    `group_patterns`, each pattern's layers together instead. Rows by gain."""
    if path.endswith(".cmodel"):
        raise ValueError(f"{path}: sensitivity quantizes the float model; give its ONNX file")
    graph = import_onnx(path, input_shapes)
    data = Path(path).read_bytes()
    if is_qdq(graph):
        raise ValueError(f"{path} is quantized already (QuantizeLinear/DequantizeLinear): sensitivity "
                         "applies to a float model")
    name = zoo_name(data)
    shallow = None if offload_shallow else functools.partial(is_shallow, target=AcceleratorTarget(cfg))
    keep = float_layer_rule(graph, quant.float_layers, shallow)
    cleaned = simplify(graph)  # the layers as quantize sees them; the patterns are checked before calibrating
    layers = _matching(graph, cleaned, layer_patterns, "--layers") if layer_patterns else None
    groups = {p: _matching(graph, cleaned, [p], "--groups") for p in group_patterns} or None
    calibrated = calibrate(graph, calibration_inputs(graph, name, quant.calibration_count), quant.rounding)
    g = calibrated.graph
    inputs = sample_inputs(graph, name, count, SENSITIVITY_SEED)
    session = _ort_session(data)
    references = [session.run(None, dict(x))[0] for x in inputs]
    result = float_layer_gains(calibrated, inputs, references, keep, layers, progress,
                               method=quant.calibration, bias_correction=quant.bias_correction,
                               groups=groups)
    macs = {n.name: node_macs(g, n) for n in dense_layers(g)}
    total = max(sum(macs.values()), 1)
    ranked = sorted(result.layers, key=result.gain, reverse=True)
    rows = [{"layer": e.name, "layers": list(e.layers), "macs": sum(macs[n] for n in e.layers),
             "macs_fraction": sum(macs[n] for n in e.layers) / total, "rms_err": e.rms_err,
             "gain": result.gain(e)} for e in ranked]
    return {"model": graph.name, "config": cfg.name, "inputs": count, "float_already": result.float_already,
            "baseline_rms_err": result.baseline_rms_err, "layers": rows}


def _matching(graph: Graph, cleaned: Graph, patterns: Sequence[str], option: str) -> set[str]:
    """The dense layers of `cleaned` (`graph` simplified) that `patterns` match; each must match one."""
    rule = float_layer_rule(graph, patterns, option=option)
    return {n.name for n in dense_layers(cleaned) if rule is not None and rule(cleaned, n)}


def print_sensitivity(report: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout  # looked up per call: a test may have replaced it
    print(f"{report['model']}: rms error {report['baseline_rms_err']:.4f} over {report['inputs']} inputs; "
          f"float already: {', '.join(report['float_already']) or 'none'}", file=out)
    print(f"{'float too':32} {'MACs':>7} {'rms error':>10} {'gain':>8}", file=out)
    for r in report["layers"]:
        print(f"{r['layer'][:32]:32} {r['macs_fraction']:7.2%} {r['rms_err']:10.4f} {r['gain']:8.4f}",
              file=out)


def _from_log(tuning_log: str | None) -> Callable[[Any], Any] | None:
    if tuning_log is None:
        return None
    from codesign.op_run import tuned_knobs

    if not Path(tuning_log).exists():
        raise ValueError(f"--tuning-log {tuning_log}: no such file")
    return lambda op: tuned_knobs(op, tuning_log)


def is_qdq(graph: Graph) -> bool:
    """Whether the model was quantized already (QuantizeLinear/DequantizeLinear pairs)."""
    return any(n.op in ("QuantizeLinear", "DequantizeLinear") for n in graph.nodes)


def zoo_name(onnx_bytes: bytes) -> str | None:
    """The zoo model a file was exported from (its producer and graph name), if any."""
    import onnx

    from codesign import zoo

    model = onnx.load_from_string(onnx_bytes)
    if model.producer_name == "codesign.zoo" and model.graph.name in zoo.names():
        return model.graph.name
    return None


def calibration_inputs(graph: Graph, name: str | None, count: int) -> list[Inputs]:
    """Zoo models calibrate on their own kind of data (digits on its training split); other
    models on seeded random inputs of the right shapes."""
    if name == "digits":
        from codesign import zoo

        images = zoo.digits_split().train_images[:count]
        return [{"input": image[None].copy()} for image in images]
    return sample_inputs(graph, name, count, CALIBRATION_SEED)


def sample_inputs(graph: Graph, name: str | None, count: int, seed: int) -> list[Inputs]:
    if name is not None:
        from codesign import zoo

        return zoo.sample_inputs(name, count, seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        feeds = {}
        for n in graph.inputs:
            v = graph.values[n]
            if np.issubdtype(np.dtype(v.dtype), np.integer):
                feeds[n] = rng.integers(0, 100, v.shape).astype(v.dtype)
            else:
                feeds[n] = rng.standard_normal(v.shape).astype(v.dtype)
        out.append(feeds)
    return out


def read_input_file(path: str, graph: Graph) -> list[Inputs]:
    """Inputs from an npz: one array per graph input, with a leading axis over samples."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not an npz file of inputs ({exc})") from None
    missing = sorted(set(graph.inputs) - set(arrays))
    if missing:
        raise ValueError(f"{path}: no array for model input {missing[0]!r} "
                         f"(inputs: {', '.join(graph.inputs)})")
    counts = {len(arrays[n]) for n in graph.inputs}
    if len(counts) != 1:
        raise ValueError(f"{path}: inputs have different sample counts {sorted(counts)}")
    return [{n: arrays[n][i] for n in graph.inputs} for i in range(counts.pop())]


def check_inputs(graph: Graph, feeds: Inputs) -> None:
    for n in graph.inputs:
        v, a = graph.values[n], feeds[n]
        if a.shape != v.shape or a.dtype.name != v.dtype:
            raise ValueError(f"input {n!r} is {a.dtype.name}{list(a.shape)}, the model takes "
                             f"{v.dtype}{list(v.shape)}")


def run(loaded: Loaded, inputs: list[Inputs], backend: Any,
        progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run every input; compare with the integer reference and onnxruntime fp32."""
    model, graph = loaded.model, loaded.model.graph
    session = _ort_session(loaded.onnx_bytes)
    results: list[ModelResult] = []
    exact, refs, gots = True, [], []
    start = time.perf_counter()
    for i, feeds in enumerate(inputs):
        check_inputs(graph, feeds)
        result = model.run(feeds, backend)
        results.append(result)
        if backend.name != "timing":
            exact = exact and matches_reference(graph, feeds, result)
            if session is not None:
                refs.append(session.run(None, feeds)[0])
                gots.append(result.outputs[graph.outputs[0]])
        if progress:
            progress(i + 1, len(inputs))
    run_s = time.perf_counter() - start
    return _report(loaded, results, backend, run_s, exact, agreement(refs, gots) if refs else None,
                   _is_classifier(refs))


def _is_classifier(outputs: list[np.ndarray]) -> bool:
    """Outputs of shape [1, classes > 1]: top-1 agreement means something."""
    return bool(outputs) and outputs[0].ndim == 2 and outputs[0].shape[0] == 1 and outputs[0].shape[1] > 1


# float steps after the integer part (a float classifier, a pooler) run as native kernels whose
# sums are ordered differently from numpy's: outputs agree within this, integers exactly
FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-5


def matches_reference(graph: Graph, feeds: Inputs, result: ModelResult) -> bool:
    """correct_int8: every integer tensor handed to float (each Dequantize input) equals the
    integer reference exactly, and so do integer outputs; float outputs agree within
    FLOAT_RTOL/FLOAT_ATOL. The reference quantizes the float values the run quantized (a float
    step between two integer parts, run natively, may differ from numpy in the last bit, which
    can move a Quantize by one step): each integer part is checked exactly on its own inputs."""
    outputs, boundary = reference_boundary(graph, feeds, result.handed_in)
    if set(boundary) != set(result.boundary):
        return False
    if not all(np.array_equal(result.boundary[k], v) for k, v in boundary.items()):
        return False
    for name, want in outputs.items():
        got = result.outputs[name]
        same = (np.allclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL)
                if np.issubdtype(want.dtype, np.floating) else np.array_equal(got, want))
        if got.shape != want.shape or not same:
            return False
    return True


def _ort_session(onnx_bytes: bytes | None) -> Any:
    if onnx_bytes is None:
        return None
    import onnxruntime as ort

    return ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])


def _report(loaded: Loaded, results: list[ModelResult], backend: Any, run_s: float, exact: bool,
            fp32: Agreement | None, classifier: bool) -> dict[str, Any]:
    model = loaded.model
    cfg = model.target.cfg
    n = max(len(results), 1)
    cycles = sum(r.cycles for r in results) / n
    host_s = sum(r.host_s for r in results) / n
    timed = backend.name != "fsim"
    return {
        "model": model.graph.name, "config": cfg.name, "backend": backend.name, "inputs": len(results),
        "correct_int8": None if backend.name == "timing" else exact,
        "top1_agreement": fp32.top1 if fp32 and classifier else None,
        "top1_ci95": list(fp32.top1_ci95) if fp32 and classifier else None,
        "cosine": fp32.cosine_mean if fp32 else None,
        "rms_err": fp32.rms_err if fp32 else None,
        "max_abs_err": fp32.max_abs_err if fp32 else None,
        "cycles": int(cycles) if timed else None,
        "latency_ms": (cycles / (cfg.clock_mhz * 1e3) if timed else 0.0) + host_s * 1e3,
        "host_ms": host_s * 1e3,
        "compile_s": loaded.compile_s, "kernels_from_disk_cache": loaded.kernels_from_disk, "run_s": run_s,
        "offloaded_macs_fraction": model.offloaded_macs_fraction(),
        "arena_bytes": model.memory.arena_bytes, "arena_bytes_unshared": model.memory.unshared_bytes,
        "device_dram_bytes": model.device.arena_bytes,
        "operators": _operators(results, timed),
    }


def _operators(results: list[ModelResult], timed: bool) -> list[dict[str, Any]]:
    """Per step, averaged over the runs."""
    rows = []
    n = len(results)
    for i, first in enumerate(results[0].steps if results else []):
        steps = [r.steps[i] for r in results]
        cycles = sum(s.cycles or 0 for s in steps) / n if timed and first.where == "accel" else None
        gemm = first.gemm_uops
        rows.append({
            "name": first.name, "op": first.op, "where": first.where, "macs": first.macs,
            "cycles": None if cycles is None else int(cycles), "gemm_uops": gemm,
            "utilization": gemm / cycles if cycles and gemm is not None else None,
            "host_ms": sum(s.host_s for s in steps) / n * 1e3,
        })
    return rows


def print_table(report: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout  # looked up per call: a test may have replaced it
    print(f"{'operator':28} {'op':15} {'where':10} {'cycles':>10} {'util':>6} {'host ms':>8}", file=out)
    for r in report["operators"]:
        if r["where"] == "view":
            continue
        cycles = "" if r["cycles"] is None else f"{r['cycles']:,}"
        util = "" if r["utilization"] is None else f"{r['utilization']:.3f}"
        print(f"{r['name'][:28]:28} {r['op']:15} {r['where']:10} {cycles:>10} {util:>6} {r['host_ms']:8.3f}",
              file=out)
    keys = ("correct_int8", "top1_agreement", "top1_ci95", "cosine", "rms_err", "max_abs_err", "cycles",
            "latency_ms", "offloaded_macs_fraction", "device_dram_bytes", "compile_s",
            "kernels_from_disk_cache", "run_s")
    for k in keys:
        print(f"{k}: {report[k]}", file=out)
