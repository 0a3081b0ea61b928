"""`compare`: one model on several backends, in one table a user can trust.

Backends: "accel" (the accelerator of each config on the cycle-level timing model: latency its
cycles at the config's clock plus the host steps it leaves, labelled simulated), "cpu" (our own
compiler's whole-model CPU target, compiler.runtime.cpu_model) and "onnxruntime" (its CPU
execution provider as a vendor runs it), the last two at each requested precision: fp32 as
imported, int8 as our quantizer writes it (cpu: the same graph the accelerator runs) or as
onnxruntime's own quantizer writes it from the same calibration inputs (codesign.run.ort_quant).
Every measured backend runs `warmup` times, then `repeat` rounds, each round one inference per
backend in turn, so a slow phase of a shared machine hits all of them alike; a simulated
backend's cycles do not vary, so it runs at most SIM_REPEAT rounds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.compare.peak import Peak, accelerator_peak, cpu_peak
from codesign.compare.records import BackendResult, CompareReport, Latency
from codesign.run.device import AcceleratorDevice, CpuDevice, Device, OnnxRuntimeDevice
from codesign.run.inputs import calibration_inputs, sample_inputs, zoo_name
from compiler.driver import PRECISIONS
from compiler.graph.ir import Graph
from compiler.quant.accuracy import agreement
from hw.config import AcceleratorConfig, resolve
from hw.errors import InputError

BACKENDS = ("accel", "cpu", "onnxruntime")  # the default
KNOWN_BACKENDS = (*BACKENDS, "gpu")  # gpu: fp32 on an NVIDIA GPU (codesign.run.gpu), asked for by name
SIM_REPEAT = 3


@dataclass(frozen=True)
class CompareRequest:
    """What to compare: the ONNX file `model`, accelerator `configs` (presets or files),
    `backends`, `precisions` of the cpu and onnxruntime backends, `threads` each CPU backend
    uses, timed rounds `repeat` after `warmup`, `inputs` for agreement, the simulator `sim`."""

    model: str
    configs: tuple[str, ...] = ("vta",)
    backends: tuple[str, ...] = BACKENDS
    precisions: tuple[str, ...] = PRECISIONS
    threads: int = 1
    repeat: int = 10
    warmup: int = 2
    inputs: int = 1
    sim: str = "timing"
    tuning_log: str | None = None  # the cpu backend's schedules (codesign tune model --target cpu)
    cpu_watts: float | None = None  # the stated power of the cores the CPU backends use

    def check(self) -> list[AcceleratorConfig]:
        """The resolved configs; InputError (ConfigError for a config) for anything wrong."""
        for b in self.backends:
            if b not in KNOWN_BACKENDS:
                raise InputError(f"unknown backend {b!r}; known: {', '.join(KNOWN_BACKENDS)}")
        if not self.backends:
            raise InputError(f"no backend to compare; known: {', '.join(KNOWN_BACKENDS)}")
        for p in self.precisions:
            if p not in PRECISIONS:
                raise InputError(f"unknown precision {p!r}; known: {', '.join(PRECISIONS)}")
        for name, value, low in (("threads", self.threads, 1), ("repeat", self.repeat, 1),
                                 ("warmup", self.warmup, 0), ("inputs", self.inputs, 1)):
            if value < low:
                raise InputError(f"--{name} must be at least {low}, not {value}")
        if self.cpu_watts is not None and not (math.isfinite(self.cpu_watts) and self.cpu_watts > 0):
            raise InputError(f"--cpu-watts must be a positive number of watts, not {self.cpu_watts:g}")
        if "gpu" in self.backends:  # refused before anything is compiled, where no GPU runs
            from codesign.run.gpu import require_gpu

            require_gpu("--backends gpu")
        if not Path(self.model).is_file():
            raise InputError(f"{self.model}: no such model file")
        if self.tuning_log:
            from compiler.tune.cpu import read_log

            read_log(self.tuning_log)  # a missing or foreign log is refused before compiling
        return [resolve(c) for c in self.configs]


@dataclass
class _Entry:
    backend: str
    device: Device
    precision: str
    timing: str
    threads: int | None
    peak: Peak
    compile_s: float
    fallbacks: tuple[str, ...] = ()
    values: Device | None = None  # what computes its outputs, where `device` only counts time
    config: AcceleratorConfig | None = None  # an accelerator's design, for its energy


def compare(request: CompareRequest, progress: Callable[[str], None] | None = None) -> CompareReport:
    """Every backend of `request` on its model: the CompareReport."""
    from compiler.frontend import import_onnx

    configs = request.check()
    data = Path(request.model).read_bytes()
    graph = import_onnx(request.model)
    name = zoo_name(data)
    calibration = calibration_inputs(graph, name, 16)
    samples = sample_inputs(graph, name, request.inputs, seed=0)
    say = progress or (lambda _msg: None)
    entries = _devices(request, graph, data, calibration, configs, say)
    reference = OnnxRuntimeDevice(data, threads=request.threads, name="onnxruntime fp32 reference")
    refs = [reference.infer(x).outputs[reference.output_names[0]] for x in samples]
    say("timing")
    times = _time(entries, samples[0], request)
    macs = _model_macs(graph)
    results = [_result(e, times[i], macs, refs, samples, graph.outputs[0], request.cpu_watts)
               for i, e in enumerate(entries)]
    return CompareReport(graph.name, macs, len(samples), request.repeat, request.threads, tuple(results))


def _devices(request: CompareRequest, graph: Graph, data: bytes, calibration: list[dict[str, np.ndarray]],
             configs: list[AcceleratorConfig], say: Callable[[str], None]) -> list[_Entry]:
    from codesign.run.ort_quant import ort_qdq
    from compiler.driver import compile_cpu, compile_graph
    from compiler.target import AcceleratorTarget
    from compiler.tune.cpu import read_log
    from sim.backends import make_backend

    entries = []
    tuned = read_log(request.tuning_log) if request.tuning_log else None
    host_peak = cpu_peak(request.threads) if {"cpu", "onnxruntime"} & set(request.backends) else None
    for backend in request.backends:
        if backend == "accel":
            for cfg in configs:
                say(f"compiling for {cfg.name}")
                start = time.perf_counter()
                model = compile_graph(graph, AcceleratorTarget(cfg), calibration, where=request.model)
                sim = make_backend(request.sim, cfg)
                device = AcceleratorDevice(model, sim)
                values = None if sim.capabilities.values else AcceleratorDevice(
                    model, make_backend("fsim", cfg))
                entries.append(_Entry(f"accel:{cfg.name}", device, "int8", "simulated", None,
                                      accelerator_peak(cfg), time.perf_counter() - start, values=values,
                                      config=cfg))
            continue
        if backend == "gpu":
            entries.append(_gpu_entry(request, say))
            continue
        assert host_peak is not None
        for precision in request.precisions:
            say(f"compiling {backend} {precision}")
            start = time.perf_counter()
            if backend == "cpu":
                target = AcceleratorTarget(configs[0]) if configs else None
                cpu = compile_cpu(graph, precision, calibration, shallow_target=target,
                                  threads=request.threads, where=request.model, tuned=tuned)
                seconds = time.perf_counter() - start
                entries.append(_Entry(f"cpu:{precision}", CpuDevice(cpu), precision, "measured",
                                      request.threads, host_peak, seconds, tuple(cpu.fallbacks())))
            else:
                onnx_bytes = data if precision == "fp32" else ort_qdq(data, calibration)
                ort_device = OnnxRuntimeDevice(onnx_bytes, request.threads, f"onnxruntime {precision}",
                                               vendor=True)
                entries.append(_Entry(f"onnxruntime:{precision}", ort_device, precision, "measured",
                                      request.threads, host_peak, time.perf_counter() - start))
    return entries


def _gpu_entry(request: CompareRequest, say: Callable[[str], None]) -> _Entry:
    """Our GPU target, fp32 (the precisions asked for apply to the CPU backends)."""
    from codesign.run.gpu import GpuDevice, gpu_peak, load_gpu

    say("compiling gpu fp32")
    model, _, _, seconds = load_gpu(request.model)
    return _Entry("gpu:fp32", GpuDevice(model), "fp32", "measured", None, gpu_peak(model.target), seconds,
                  tuple(model.fallbacks()))


def _time(entries: list[_Entry], sample: dict[str, np.ndarray], request: CompareRequest) -> list[list[float]]:
    """Per entry, the latencies of the timed rounds (after warm-up), interleaved."""
    for e in entries:
        for _ in range(request.warmup if e.timing == "measured" else 0):
            e.device.infer(sample)
    times: list[list[float]] = [[] for _ in entries]
    for round_ in range(request.repeat):
        for i, e in enumerate(entries):
            if e.timing == "simulated" and round_ >= SIM_REPEAT:
                continue
            latency = e.device.infer(sample).latency_s
            assert latency is not None, f"{e.backend} counts no time"
            times[i].append(latency)
    return times


def _result(e: _Entry, seconds: list[float], macs: int, refs: list[np.ndarray],
            samples: list[dict[str, np.ndarray]], output: str, cpu_watts: float | None) -> BackendResult:
    latency = Latency.of(seconds)
    median_s = latency.median_ms / 1e3
    gops = 2 * macs / median_s / 1e9
    outs = [_first_output(e.values or e.device, x, output) for x in samples]
    agree = agreement(refs, outs)
    classifier = refs[0].ndim == 2 and refs[0].shape[0] == 1 and refs[0].shape[1] > 1
    return BackendResult(
        backend=e.backend, device=e.device.name, precision=e.precision, timing=e.timing, threads=e.threads,
        latency=latency, throughput_per_s=1.0 / median_s, gops=gops, peak_gops=e.peak.gops,
        peak_fraction=gops / e.peak.gops, peak_source=e.peak.source, cosine=agree.cosine_mean,
        top1_agreement=agree.top1 if classifier else None,
        top1_ci95=tuple(agree.top1_ci95) if classifier else None,  # type: ignore[arg-type]
        compile_s=e.compile_s, fallbacks=e.fallbacks,
        **(_energy(e, samples[0]) if e.config is not None else _cpu_energy(median_s, cpu_watts)))


def _cpu_energy(median_s: float, watts: float | None) -> dict[str, Any]:
    """A CPU backend's energy per inference estimated as its median latency x the power the
    user states (`--cpu-watts`); none without it (this workbench reads no RAPL counters yet)."""
    if watts is None:
        return {}
    return {"energy_mj": median_s * watts * 1e3,
            "energy_source": f"estimate: median latency x {watts:g} W stated with --cpu-watts"}


def _energy(e: _Entry, sample: dict[str, np.ndarray]) -> dict[str, Any]:
    """An accelerator's energy per inference from the energy model (codesign/ppa/energy.py) over
    its accelerator steps' event counts."""
    assert e.config is not None, "an accelerator entry has its config"
    from codesign.ppa.energy import energy_model
    from sim.backend import Stats

    detail = e.device.infer(sample).detail
    totals: dict[str, int] = {}
    for step in detail.steps if detail is not None else ():
        for key, value in (step.stats or {}).items():
            if value is not None:
                totals[key] = totals.get(key, 0) + int(value)
    estimate = energy_model(Stats(**totals), e.config)
    return {"energy_mj": estimate.total_pj * 1e-9,
            "energy_source": f"modeled: accelerator steps only, {estimate.node_nm} nm, {estimate.dram} DRAM "
                             "(codesign/ppa/energy.py); host steps not counted"}


def _first_output(device: Device, feeds: dict[str, np.ndarray], output: str) -> np.ndarray:
    outputs = device.infer(feeds).outputs
    return outputs[output] if output in outputs else next(iter(outputs.values()))


def _model_macs(graph: Graph) -> int:
    from compiler.graph.passes import simplify
    from compiler.runtime.model import node_macs

    g = simplify(graph)
    return sum(node_macs(g, n) for n in g.nodes)
