"""Whole models on an NVIDIA GPU (`codesign run --backend gpu`, `codesign compare --backends
gpu`): our own GPU target (compiler.runtime.gpu_model) through the CUDA driver, fp32.

Without a GPU (no cuda-bindings, no driver, no device) every entry point raises
GpuUnavailableError saying which, before any model is compiled.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from codesign.compare.peak import Peak
from codesign.run.device import TimedDevice
from compiler.errors import GpuUnavailableError
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph
from compiler.runtime.gpu_model import GpuModel
from compiler.target.gpu import GpuTarget
from hw.errors import InputError


def require_gpu(what: str) -> None:
    """GpuUnavailableError naming `what` (the option that asked) and why, where no GPU runs."""
    from compiler.runtime.gpu_driver import gpu_available

    ok, reason = gpu_available()
    if not ok:
        raise GpuUnavailableError(f"{what} needs an NVIDIA GPU: {reason}")


def check_precision(precision: str) -> None:
    if precision != "fp32":
        raise InputError(f"--backend gpu runs fp32, not {precision}")


class GpuDevice(TimedDevice):
    """A compiled model on the GPU; latency is measured around the run (inputs uploaded, every
    kernel, outputs downloaded), as the CPU backends' is."""

    def __init__(self, model: GpuModel) -> None:
        super().__init__(model)
        self.model: GpuModel = model
        self.name = f"gpu {model.target.device} ({model.target.arch})"


def load_gpu(path: str, input_shapes: Mapping[str, tuple[int, ...]] | None = None
             ) -> tuple[GpuModel, Graph, bytes, float]:
    """The model at `path` compiled for this machine's GPU: (model, graph, ONNX bytes, seconds)."""
    from compiler.runtime.gpu import CudaExecutor
    from compiler.runtime.gpu_driver import device_target

    require_gpu("--backend gpu")
    start = time.perf_counter()
    graph = import_onnx(path, input_shapes)
    model = GpuModel.compile(graph, CudaExecutor(), device_target())
    return model, graph, Path(path).read_bytes(), time.perf_counter() - start


def gpu_peak(target: GpuTarget) -> Peak:
    lanes = target.fp32_lanes_per_sm
    return Peak(target.peak_fp32_flops / 1e9,
                f"modeled: {target.sm_count} SMs x {lanes} FP32 lanes x 2 x {target.clock_khz / 1e6:g} GHz")
