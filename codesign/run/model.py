"""Whole models on a backend: a compiled model loaded (compiler.driver, with the zoo's data for
zoo models) or read back from a .cmodel, run on every input, and the figures of `codesign run`
as a `ModelReport` (exactness against the integer reference, agreement with onnxruntime fp32,
cycles and where they go)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from codesign.run.data import Dataset, UserData
from codesign.run.device import AcceleratorDevice, OnnxRuntimeDevice
from codesign.run.inputs import Inputs, calibration_inputs, check_inputs, zoo_name
from compiler.codegen.cpu import cache_info
from compiler.driver import DEFAULT_QUANT, QuantOptions, compile_graph
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph
from compiler.quant.accuracy import Agreement, agreement, label_accuracy
from compiler.runtime import serialize
from compiler.runtime.model import CompiledModel, ModelResult, StepRecord, reference_boundary
from compiler.target import AcceleratorTarget
from hw.config import AcceleratorConfig
from hw.errors import InputError
from sim import run_cache
from sim.backend import Backend


@dataclass
class Loaded:
    model: CompiledModel
    onnx_bytes: bytes | None  # the float model, for the fp32 reference
    zoo_name: str | None
    compile_s: float
    kernels_from_disk: int  # host kernels loaded from the disk cache, not compiled
    evaluation: Dataset | None = None  # the user's --eval-data, checked against the model


def load_model(path: str, cfg: AcceleratorConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
               quant: QuantOptions = DEFAULT_QUANT, tuning_log: str | None = None,
               offload_shallow: bool = False, data: UserData | None = None) -> Loaded:
    """A CompiledModel from an ONNX file (imported, then compiler.driver.compile_graph, calibrated
    on the zoo's own data for zoo models) or from a .cmodel file; with `tuning_log`, each accelerator
    operator uses the fastest schedule the log holds for it on this config, else its default.
    Host kernels come from the disk cache where it has them (compiler.codegen.cpu.jit);
    `Loaded.kernels_from_disk` counts them. The user's `data` (calibration and evaluation
    samples) is read and checked against the imported model before it is compiled."""
    start = time.perf_counter()
    before = cache_info().from_disk
    knobs_for = _from_log(tuning_log)
    if path.endswith(".cmodel"):
        if quant.float_layers:
            raise InputError(f"{path} is compiled already: --float-layers applies when compiling "
                             "an ONNX model")
        if data is not None and data.calibration is not None:
            raise InputError(f"{path} is compiled already: --calibration-data applies when compiling "
                             "an ONNX model")
        model, extra = serialize.load(path, knobs_for)
        onnx_path = extra.get("onnx")
        onnx_bytes = Path(onnx_path).read_bytes() if onnx_path and Path(onnx_path).exists() else None
        name = extra.get("zoo")
        evaluation = data.load_evaluation(model.graph) if data else None
    else:
        graph = import_onnx(path, input_shapes)  # its errors name the file
        onnx_bytes = Path(path).read_bytes()
        name = zoo_name(onnx_bytes)
        evaluation = data.load_evaluation(graph) if data else None
        calibration = calibration_inputs(graph, name, quant.calibration_count,
                                         data.calibration if data else None)
        model = compile_graph(graph, AcceleratorTarget(cfg), calibration, quant=quant, knobs_for=knobs_for,
                              offload_shallow=offload_shallow, where=path)
    return Loaded(model, onnx_bytes, name, time.perf_counter() - start, cache_info().from_disk - before,
                  evaluation)


@dataclass(frozen=True)
class OperatorRow:
    """One step of a model run, averaged over the inputs; `stats` (the step's counters, averaged;
    None off the accelerator or without cycles) feeds figures and is left out of the JSON."""

    name: str
    op: str
    where: str
    macs: int
    cycles: int | None
    gemm_uops: int | None
    utilization: float | None
    host_ms: float
    stats: dict[str, float] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["stats"]
        return out


@dataclass(frozen=True)
class ModelReport:
    """The figures of one model run over its inputs (`codesign run`): cycles and latency are
    per input; `correct_int8` is None where the backend computes no values; the fp32 figures
    are None without an fp32 model to compare with, the top-1 ones for a non-classifier."""

    model: str
    config: str
    backend: str
    inputs: int
    correct_int8: bool | None
    top1_agreement: float | None
    top1_ci95: list[float] | None
    cosine: float | None
    rms_err: float | None
    max_abs_err: float | None
    cycles: int | None
    latency_ms: float
    host_ms: float
    compile_s: float
    kernels_from_disk_cache: int
    run_s: float
    offloaded_macs_fraction: float
    arena_bytes: int
    arena_bytes_unshared: int
    device_dram_bytes: int
    operators: list[OperatorRow]
    # against --labels: top-1/top-5 of onnxruntime fp32 and of the int8 run, with Wilson intervals
    fp32_accuracy: dict[str, Any] | None = None
    int8_accuracy: dict[str, Any] | None = None
    # fsim's Programs replayed from records kept on disk by an earlier process (sim.run_cache)
    fsim_records_from_disk: int = 0
    # the backend's once-per-model work before the first input, not in run_s (fsim: each Program's
    # record loaded or made, its replay bound: CompiledModel.prepare), and the steps it readied
    setup_s: float = 0.0
    prepared_steps: int = 0

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "operators"}
        return {**out, "operators": [r.to_json() for r in self.operators]}


def run(loaded: Loaded, inputs: list[Inputs], backend: Backend,
        progress: Callable[[int, int], None] | None = None, labels: np.ndarray | None = None) -> ModelReport:
    """Run every input; compare with the integer reference and onnxruntime fp32, and both with
    `labels` (one per input) where given."""
    graph = loaded.model.graph
    device = AcceleratorDevice(loaded.model, backend)
    reference = None if loaded.onnx_bytes is None else OnnxRuntimeDevice(loaded.onnx_bytes)
    results: list[ModelResult] = []
    exact, refs, gots = True, [], []
    loaded_before = run_cache.counts()["loaded"]
    start = time.perf_counter()
    prepared = device.prepare()
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    for i, feeds in enumerate(inputs):
        check_inputs(graph, feeds)
        result = device.infer(feeds).detail
        assert result is not None  # the accelerator device keeps its per-step record
        results.append(result)
        if backend.capabilities.values:
            exact = exact and matches_reference(graph, feeds, result)
            gots.append(result.outputs[graph.outputs[0]])
            if reference is not None:
                fp32 = reference.infer(feeds)
                refs.append(fp32.outputs[reference.output_names[0]])
        if progress:
            progress(i + 1, len(inputs))
    run_s = time.perf_counter() - start
    report = dataclasses.replace(
        _report(loaded, results, backend, run_s, exact, agreement(refs, gots) if refs else None,
                _is_classifier(refs)),
        fsim_records_from_disk=run_cache.counts()["loaded"] - loaded_before, setup_s=setup_s,
        prepared_steps=prepared)
    if labels is None or not gots:
        return report
    return dataclasses.replace(
        report, int8_accuracy=label_accuracy(gots, labels).to_dict(),
        fp32_accuracy=label_accuracy(refs, labels).to_dict() if refs else None)


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


def _report(loaded: Loaded, results: list[ModelResult], backend: Backend, run_s: float, exact: bool,
            fp32: Agreement | None, classifier: bool) -> ModelReport:
    model = loaded.model
    cfg = model.target.cfg
    n = max(len(results), 1)
    cycles = sum(r.cycles for r in results) / n
    host_s = sum(r.host_s for r in results) / n
    timed = backend.capabilities.cycles
    top1 = fp32 is not None and classifier
    return ModelReport(
        model=model.graph.name, config=cfg.name, backend=backend.name, inputs=len(results),
        correct_int8=exact if backend.capabilities.values else None,
        top1_agreement=fp32.top1 if fp32 and top1 else None,
        top1_ci95=list(fp32.top1_ci95) if fp32 and top1 else None,
        cosine=fp32.cosine_mean if fp32 else None,
        rms_err=fp32.rms_err if fp32 else None,
        max_abs_err=fp32.max_abs_err if fp32 else None,
        cycles=int(cycles) if timed else None,
        latency_ms=(cycles / (cfg.clock_mhz * 1e3) if timed else 0.0) + host_s * 1e3,
        host_ms=host_s * 1e3,
        compile_s=loaded.compile_s, kernels_from_disk_cache=loaded.kernels_from_disk, run_s=run_s,
        offloaded_macs_fraction=model.offloaded_macs_fraction(),
        arena_bytes=model.memory.arena_bytes, arena_bytes_unshared=model.memory.unshared_bytes,
        device_dram_bytes=model.device.arena_bytes,
        operators=_operators(results, timed),
    )


def _operators(results: list[ModelResult], timed: bool) -> list[OperatorRow]:
    """Per step, averaged over the runs."""
    rows = []
    n = len(results)
    for i, first in enumerate(results[0].steps if results else []):
        steps = [r.steps[i] for r in results]
        cycles = sum(s.cycles or 0 for s in steps) / n if timed and first.where == "accel" else None
        gemm = first.gemm_uops
        rows.append(OperatorRow(
            name=first.name, op=first.op, where=first.where, macs=first.macs,
            cycles=None if cycles is None else int(cycles), gemm_uops=gemm,
            utilization=gemm / cycles if cycles and gemm is not None else None,
            host_ms=sum(s.host_s for s in steps) / n * 1e3,
            stats=_mean_stats(steps) if cycles is not None else None,
        ))
    return rows


def _mean_stats(steps: list[StepRecord]) -> dict[str, float] | None:
    """The steps' numeric counters averaged (None where a step has none)."""
    if any(s.stats is None for s in steps):
        return None
    keys = [k for k, v in (steps[0].stats or {}).items() if isinstance(v, int | float)]
    return {k: sum(float((s.stats or {}).get(k) or 0) for s in steps) / len(steps) for k in keys}


def print_table(report: ModelReport, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call: a test may have replaced it
    print(f"{'operator':28} {'op':15} {'where':10} {'cycles':>10} {'util':>6} {'host ms':>8}", file=out)
    for r in report.operators:
        if r.where == "view":
            continue
        cycles = "" if r.cycles is None else f"{r.cycles:,}"
        util = "" if r.utilization is None else f"{r.utilization:.3f}"
        print(f"{r.name[:28]:28} {r.op:15} {r.where:10} {cycles:>10} {util:>6} {r.host_ms:8.3f}", file=out)
    keys = ("correct_int8", "top1_agreement", "top1_ci95", "cosine", "rms_err", "max_abs_err", "cycles",
            "latency_ms", "offloaded_macs_fraction", "device_dram_bytes", "compile_s",
            "kernels_from_disk_cache", "fsim_records_from_disk", "setup_s", "run_s", "fp32_accuracy",
            "int8_accuracy")
    for k in keys:
        print(f"{k}: {getattr(report, k)}", file=out)


def _from_log(tuning_log: str | None) -> Callable[[Any], Any] | None:
    if tuning_log is None:
        return None
    from codesign.run.op import tuned_knobs

    if not Path(tuning_log).exists():
        raise InputError(f"--tuning-log {tuning_log}: no such file")
    return lambda op: tuned_knobs(op, tuning_log)
