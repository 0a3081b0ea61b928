"""Whole models on the host CPU (`codesign run --backend cpu|onnxruntime`, `codesign compile
--target cpu`): our own CPU target or onnxruntime, fp32 or int8, timed per input, checked
against the integer reference (cpu int8: exactly) and onnxruntime fp32."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codesign.compare.records import Latency
from codesign.run.data import UserData
from codesign.run.device import CpuDevice, Device, OnnxRuntimeDevice
from codesign.run.inputs import Inputs, calibration_inputs, check_inputs, zoo_name
from compiler.driver import DEFAULT_QUANT, QuantOptions, compile_cpu
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph
from compiler.quant.accuracy import agreement
from compiler.runtime.cpu_model import CpuModel
from compiler.target import AcceleratorTarget
from hw.config import AcceleratorConfig

HOST_BACKENDS = ("cpu", "onnxruntime", "gpu")  # gpu: codesign.run.gpu (an NVIDIA GPU, fp32)


@dataclass(frozen=True)
class HostOperatorRow:
    name: str
    op: str
    where: str
    macs: int
    host_ms: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HostRunReport:
    """`codesign run` on a host backend: latency over the inputs (measured), `correct_int8`
    (cpu int8: every integer tensor equals the integer reference; else None), agreement with
    onnxruntime fp32, and per step (cpu) where the time goes."""

    model: str
    backend: str
    precision: str
    threads: int
    inputs: int
    latency: Latency
    correct_int8: bool | None
    cosine: float | None
    top1_agreement: float | None
    compile_s: float
    fallbacks: list[str]
    operators: list[HostOperatorRow]
    top1_ci95: tuple[float, float] | None = None  # Wilson interval of top1_agreement
    rms_err: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("operators", "latency")}
        return {**out, "latency": self.latency.to_json(), "operators": [r.to_json() for r in self.operators]}


def load_cpu(path: str, precision: str, threads: int, cfg: AcceleratorConfig,
             input_shapes: Mapping[str, tuple[int, ...]] | None = None,
             quant: QuantOptions = DEFAULT_QUANT,
             tuning_log: str | None = None,
             user: UserData | None = None) -> tuple[CpuModel, Graph, bytes, float]:
    """The CPU target's model of an ONNX file (int8: the graph the accelerator of `cfg` runs,
    calibrated on the zoo's data for zoo models), with the schedules of a CPU `tuning_log`
    (compiler.tune.cpu.read_log); the imported graph, the file, compile time."""
    from compiler.tune.cpu import read_log

    tuned = read_log(tuning_log) if tuning_log else None
    start = time.perf_counter()
    graph = import_onnx(path, input_shapes)
    data = Path(path).read_bytes()
    count = quant.calibration_count
    source = user.calibration if user else None
    calibration = calibration_inputs(graph, zoo_name(data), count, source) if precision == "int8" else []
    model = compile_cpu(graph, precision, calibration, quant=quant, shallow_target=AcceleratorTarget(cfg),
                        threads=threads, where=path, tuned=tuned)
    return model, graph, data, time.perf_counter() - start


def run_host(path: str, backend: str, precision: str, threads: int, inputs: list[Inputs],
             cfg: AcceleratorConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
             quant: QuantOptions = DEFAULT_QUANT, tuning_log: str | None = None,
             user: UserData | None = None) -> HostRunReport:
    """Run every input on `backend` ("cpu" or "onnxruntime") at `precision` (the cpu backend
    with the schedules of `tuning_log`, if given)."""
    from codesign.run.model import matches_reference
    from codesign.run.ort_quant import ort_qdq

    device: Device
    if backend == "gpu":
        from codesign.run.gpu import GpuDevice, check_precision, load_gpu

        check_precision(precision)
        gpu, graph, data, compile_s = load_gpu(path, input_shapes)
        device, fallbacks = GpuDevice(gpu), gpu.fallbacks()
    elif backend == "cpu":
        model, graph, data, compile_s = load_cpu(path, precision, threads, cfg, input_shapes, quant,
                                                 tuning_log, user)
        device, fallbacks = CpuDevice(model), model.fallbacks()
    else:
        start = time.perf_counter()
        graph, data = import_onnx(path, input_shapes), Path(path).read_bytes()
        onnx_bytes = data if precision == "fp32" else ort_qdq(
            data, calibration_inputs(graph, zoo_name(data), quant.calibration_count,
                                     user.calibration if user else None))
        device = OnnxRuntimeDevice(onnx_bytes, threads, f"onnxruntime {precision}", vendor=True)
        compile_s, fallbacks = time.perf_counter() - start, []
    reference = OnnxRuntimeDevice(data, threads)
    exact: bool | None = True if backend == "cpu" and precision == "int8" else None
    seconds, refs, gots, steps = [], [], [], []
    for feeds in inputs:
        check_inputs(graph, feeds)
        result = device.infer(feeds)
        seconds.append(result.latency_s or 0.0)
        if exact is not None and result.detail is not None:
            assert isinstance(device, CpuDevice)
            exact = exact and matches_reference(device.model.graph, feeds, result.detail)
        if result.detail is not None:
            steps.append(result.detail.steps)
        refs.append(reference.infer(feeds).outputs[reference.output_names[0]])
        gots.append(next(iter(result.outputs.values())))
    agree = agreement(refs, gots)
    classifier = refs[0].ndim == 2 and refs[0].shape[0] == 1 and refs[0].shape[1] > 1
    return HostRunReport(graph.name, backend, precision, threads, len(inputs), Latency.of(seconds), exact,
                         agree.cosine_mean, agree.top1 if classifier else None, compile_s, fallbacks,
                         _operators(steps), agree.top1_ci95 if classifier else None, agree.rms_err)


def _operators(runs: list[Any]) -> list[HostOperatorRow]:
    if not runs:
        return []
    n = len(runs)
    return [HostOperatorRow(s.name, s.op, s.where, s.macs, sum(r[i].host_s for r in runs) / n * 1e3)
            for i, s in enumerate(runs[0])]
