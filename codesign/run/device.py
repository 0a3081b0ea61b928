"""Devices: what runs a whole model, as a simulator backend runs a Program.

A device takes one input (a dict of arrays by model input name) and returns an `Inference`: the
outputs by model output name and the latency of that inference (modeled at the design's clock
on an accelerator, measured on a CPU runtime; None where a backend counts no time). The
accelerator on any simulator and onnxruntime are devices today; the CPU and GPU targets and the
comparison of devices (`codesign compare`) build on this protocol.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from compiler.quant import accuracy
from compiler.runtime.cpu_model import CpuModel
from compiler.runtime.model import CompiledModel, ModelResult
from sim.backend import Backend

Inputs = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Inference:
    """One input run on a device: `outputs` by model output name, `latency_s` (None where the
    device counts no time), and the accelerator's per-step record where it has one."""

    outputs: dict[str, np.ndarray]
    latency_s: float | None
    detail: ModelResult | None = None


class Device(Protocol):
    name: str

    def infer(self, inputs: Inputs) -> Inference: ...


class AcceleratorDevice:
    """A compiled model on the accelerator, simulated by `backend`: latency is the backend's
    cycles at the config's clock plus the host steps' measured time (None on a backend that
    counts no cycles)."""

    def __init__(self, model: CompiledModel, backend: Backend) -> None:
        self.model, self.backend = model, backend
        self.name = f"accelerator {model.target.cfg.name} on {backend.name}"

    def prepare(self) -> int:
        """The backend's once-per-model work done before the first input (`CompiledModel.prepare`)."""
        return self.model.prepare(self.backend)

    def infer(self, inputs: Inputs) -> Inference:
        result = self.model.run(inputs, self.backend)
        latency = None
        if self.backend.capabilities.cycles:
            latency = result.cycles / (self.model.target.cfg.clock_mhz * 1e6) + result.host_s
        return Inference(result.outputs, latency, result)


class _Runs(Protocol):
    def run(self, inputs: Inputs) -> Any: ...


class TimedDevice:
    """A compiled model whose `run(inputs)` returns a result with `outputs`; latency is
    measured around the run (the CPU target's and the GPU's models)."""

    def __init__(self, model: _Runs) -> None:
        self.model = model

    def infer(self, inputs: Inputs) -> Inference:
        start = time.perf_counter()
        result = self.model.run(inputs)
        latency = time.perf_counter() - start
        return Inference(result.outputs, latency, result)


class CpuDevice(TimedDevice):
    """A whole model on the host CPU as our own compiler builds it (compiler.runtime.cpu_model:
    every operator a native kernel), float or int8; latency is measured around the run."""

    def __init__(self, model: CpuModel) -> None:
        super().__init__(model)
        self.model: CpuModel = model
        self.name = f"cpu {model.precision}"


class OnnxRuntimeDevice:
    """An ONNX model on onnxruntime's CPU execution provider (`threads`: 0 for its default), as
    compiler.quant.accuracy.ort_session configures it (a reference: QDQ pairs run as written),
    or, `vendor`, as a vendor runs it (every graph optimisation, QDQ fused into its int8
    kernels: codesign.run.ort_quant); latency is measured."""

    def __init__(self, onnx_bytes: bytes, threads: int = 0, name: str = "onnxruntime cpu",
                 vendor: bool = False) -> None:
        if vendor:
            import onnxruntime as ort

            from codesign.run.ort_quant import vendor_session_options

            self.session = ort.InferenceSession(onnx_bytes, vendor_session_options(threads),
                                                providers=["CPUExecutionProvider"])
        else:
            self.session = accuracy.ort_session(onnx_bytes, threads=threads)
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.name = name

    def infer(self, inputs: Inputs) -> Inference:
        start = time.perf_counter()
        outputs = self.session.run(None, dict(inputs))
        latency = time.perf_counter() - start
        return Inference(dict(zip(self.output_names, outputs, strict=True)), latency)
