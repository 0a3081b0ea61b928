"""GPU kernels: compiled once (loop IR -> PTX), then run by an executor that owns device memory.

`compile_kernel(op, target, knobs)` lowers a GPU operator and emits its PTX (`GpuKernel`: the PTX,
the launch, the loop IR).  An executor keeps tensors where the kernels run and launches them:

- `CudaExecutor` (a real GPU, through cuda-bindings): device memory from cuMemAlloc, modules
  loaded from PTX by the driver (cuModuleLoadData), launches with cuLaunchKernel, timing with
  CUDA events; it raises GpuUnavailableError (with the reason) where there is no GPU;
- `SimtExecutor` (no GPU): "device" memory is numpy arrays and a launch runs the loop IR with
  compiler.runtime.gpu_simt, so the whole-model runtime (compiler.runtime.gpu_model) is tested
  on a CPU with the same steps, buffers and launches.
Tensors stay on the executor between kernels; only a model's inputs and outputs are copied.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from compiler.codegen.gpu import emit_kernel, to_ptx
from compiler.lower.gpu import GpuKernelIR
from compiler.ops.gpu.base import GpuOp, Knobs
from compiler.runtime.gpu_driver import Driver, driver_api
from compiler.runtime.gpu_simt import simulate
from compiler.target.gpu import GpuTarget


@dataclass(frozen=True)
class GpuKernel:
    """One operator compiled for one target: PTX text, entry name, launch, its knobs."""

    name: str
    ptx: str
    ir: GpuKernelIR
    knobs: Knobs
    arch: str

    @property
    def grid(self) -> tuple[int, int, int]:
        return self.ir.grid

    @property
    def block(self) -> tuple[int, int, int]:
        return self.ir.block


def compile_kernel(op: GpuOp, target: GpuTarget, knobs: Knobs | None = None) -> GpuKernel:
    """`op` lowered with `knobs` (default: the op's default point) and emitted as PTX."""
    knobs = op.default_knobs(target) if knobs is None else knobs
    kernel_ir = op.lower(target, knobs)
    return GpuKernel(op.op, to_ptx(emit_kernel(kernel_ir), target), kernel_ir, knobs, target.arch)


@dataclass
class DeviceTensor:
    """A tensor in an executor's memory: `handle` is the executor's (a CUdeviceptr, an array)."""

    shape: tuple[int, ...]
    handle: Any
    nbytes: int = 0

    def view(self, shape: tuple[int, ...]) -> DeviceTensor:
        """The same memory under another shape of as many elements (Reshape, Flatten)."""
        assert math.prod(shape) == math.prod(self.shape), (shape, self.shape)
        return DeviceTensor(tuple(shape), self.handle, self.nbytes)


class Executor(Protocol):
    name: str

    def upload(self, array: np.ndarray) -> DeviceTensor: ...

    def empty(self, shape: tuple[int, ...]) -> DeviceTensor: ...

    def download(self, tensor: DeviceTensor) -> np.ndarray: ...

    def write(self, tensor: DeviceTensor, array: np.ndarray) -> None: ...

    def launch(self, kernel: GpuKernel, args: list[DeviceTensor]) -> None: ...

    def synchronize(self) -> None: ...


class SimtExecutor:
    """Kernels run on the CPU by the lockstep interpreter (compiler.runtime.gpu_simt)."""

    name = "simt (numpy, no GPU)"

    def upload(self, array: np.ndarray) -> DeviceTensor:
        data = np.ascontiguousarray(array, dtype=np.float32).copy()
        return DeviceTensor(data.shape, data, data.nbytes)

    def empty(self, shape: tuple[int, ...]) -> DeviceTensor:
        return self.upload(np.zeros(shape, np.float32))

    def download(self, tensor: DeviceTensor) -> np.ndarray:
        return np.asarray(tensor.handle).reshape(tensor.shape).copy()

    def write(self, tensor: DeviceTensor, array: np.ndarray) -> None:
        np.asarray(tensor.handle).reshape(-1)[:] = np.asarray(array, np.float32).reshape(-1)

    def launch(self, kernel: GpuKernel, args: list[DeviceTensor]) -> None:
        func = kernel.ir.func
        n_in = len(func.inputs)
        inputs = [np.asarray(a.handle).reshape(t.shape)
                  for a, t in zip(args[:n_in], func.inputs, strict=True)]
        outs = simulate(kernel.ir, inputs)
        for arg, out in zip(args[n_in:], outs, strict=True):
            np.asarray(arg.handle).reshape(-1)[:] = out.reshape(-1)

    def synchronize(self) -> None:
        pass


@dataclass
class CudaExecutor:
    """A real GPU through the CUDA driver API (cuda-bindings); one context, one stream."""

    ordinal: int = 0
    name: str = "cuda"
    drv: Driver = field(init=False)
    _modules: dict[str, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.drv = driver_api()
        dev = self.drv.check(self.drv.cuDeviceGet(self.ordinal), "cuDeviceGet")
        self.context = self.drv.check(self.drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        self.drv.check(self.drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = self.drv.check(self.drv.cuStreamCreate(0), "cuStreamCreate")

    def empty(self, shape: tuple[int, ...]) -> DeviceTensor:
        nbytes = max(4, 4 * math.prod(shape))
        ptr = self.drv.check(self.drv.cuMemAlloc(nbytes), "cuMemAlloc")
        return DeviceTensor(tuple(shape), ptr, nbytes)

    def upload(self, array: np.ndarray) -> DeviceTensor:
        tensor = self.empty(tuple(np.shape(array)))
        self.write(tensor, array)
        return tensor

    def write(self, tensor: DeviceTensor, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array, dtype=np.float32)
        assert data.size == math.prod(tensor.shape), (data.shape, tensor.shape)
        self.drv.check(self.drv.cuMemcpyHtoD(tensor.handle, data.ctypes.data, data.nbytes), "cuMemcpyHtoD")

    def download(self, tensor: DeviceTensor) -> np.ndarray:
        out = np.empty(tensor.shape, np.float32)
        self.synchronize()
        self.drv.check(self.drv.cuMemcpyDtoH(out.ctypes.data, tensor.handle, out.nbytes), "cuMemcpyDtoH")
        return out

    def function(self, kernel: GpuKernel) -> Any:
        fn = self._modules.get(kernel.ptx)
        if fn is None:
            image = np.frombuffer(kernel.ptx.encode() + b"\0", dtype=np.uint8)
            module = self.drv.check(self.drv.cuModuleLoadData(image.ctypes.data),
                                    f"cuModuleLoadData({kernel.name})")
            fn = self.drv.check(self.drv.cuModuleGetFunction(module, kernel.name.encode()),
                                f"cuModuleGetFunction({kernel.name})")
            self._modules[kernel.ptx] = fn
        return fn

    def launch(self, kernel: GpuKernel, args: list[DeviceTensor]) -> None:
        fn = self.function(kernel)
        pointers = [ctypes.c_void_p(int(a.handle)) for a in args]
        params = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(p) for p in pointers])
        self.drv.check(self.drv.cuLaunchKernel(fn, *kernel.grid, *kernel.block, 0, self.stream,
                                               ctypes.addressof(params), 0), f"launch {kernel.name}")

    def synchronize(self) -> None:
        self.drv.check(self.drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def time_kernel(self, kernel: GpuKernel, args: list[DeviceTensor], repeat: int = 20) -> float:
        """Median seconds of `repeat` launches, each timed with CUDA events (after one warm-up)."""
        self.launch(kernel, args)
        start = self.drv.check(self.drv.cuEventCreate(0), "cuEventCreate")
        stop = self.drv.check(self.drv.cuEventCreate(0), "cuEventCreate")
        times = []
        for _ in range(repeat):
            self.drv.check(self.drv.cuEventRecord(start, self.stream), "cuEventRecord")
            self.launch(kernel, args)
            self.drv.check(self.drv.cuEventRecord(stop, self.stream), "cuEventRecord")
            self.drv.check(self.drv.cuEventSynchronize(stop), "cuEventSynchronize")
            times.append(self.drv.check(self.drv.cuEventElapsedTime(start, stop), "cuEventElapsedTime") / 1e3)
        return float(np.median(times))


def make_executor(name: str) -> Executor:
    """"cuda" (a GPU; GpuUnavailableError without one) or "simt" (numpy, anywhere)."""
    if name == "simt":
        return SimtExecutor()
    if name == "cuda":
        return CudaExecutor()
    raise ValueError(f"unknown GPU executor {name!r}; known: cuda, simt")
