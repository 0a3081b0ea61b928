"""GPU kernels and executors: the CUDA executor's driver calls (device memory, PTX modules,
launch parameters packed as the driver reads them) checked against a fake driver that runs each
launch with the SIMT interpreter, and on a real GPU where one is."""

from __future__ import annotations

import ctypes
import itertools
from typing import Any

import numpy as np
import pytest

from compiler.ops.gpu import Eltwise, MatMul
from compiler.runtime import gpu as gpu_runtime
from compiler.runtime.gpu import CudaExecutor, GpuKernel, SimtExecutor, compile_kernel
from compiler.runtime.gpu_driver import Driver, gpu_available
from compiler.runtime.gpu_simt import simulate
from compiler.target.gpu import gpu_preset

SM80 = gpu_preset("sm_80")
AVAILABLE, REASON = gpu_available()


class FakeCuda:
    """cuda.bindings.driver's calls this executor makes, with device memory in numpy: a launch
    reads the kernel's argument pointers back from `kernelParams` and runs the loop IR."""

    def __init__(self, kernels: dict[str, GpuKernel]) -> None:
        self.memory: dict[int, np.ndarray] = {}
        self.kernels = kernels  # by PTX text
        self.launches: list[tuple[str, tuple[int, ...]]] = []
        self._next = itertools.count(0x1000, 0x1000)

    def cuDeviceGet(self, ordinal: int) -> tuple[int, int]:
        return 0, ordinal

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[int, str]:
        return 0, "context"

    def cuCtxSetCurrent(self, ctx: str) -> tuple[int]:
        return (0,)

    def cuStreamCreate(self, flags: int) -> tuple[int, str]:
        return 0, "stream"

    def cuMemAlloc(self, nbytes: int) -> tuple[int, int]:
        ptr = next(self._next)
        self.memory[ptr] = np.zeros(nbytes // 4, np.float32)
        return 0, ptr

    def cuMemcpyHtoD(self, dst: int, src: int, nbytes: int) -> tuple[int]:
        host = (ctypes.c_float * (nbytes // 4)).from_address(src)
        self.memory[dst][: nbytes // 4] = np.ctypeslib.as_array(host)
        return (0,)

    def cuMemcpyDtoH(self, dst: int, src: int, nbytes: int) -> tuple[int]:
        ctypes.memmove(dst, self.memory[src].ctypes.data, nbytes)
        return (0,)

    def cuModuleLoadData(self, image: int) -> tuple[int, str]:
        return 0, ctypes.string_at(image).decode()

    def cuModuleGetFunction(self, module: str, name: bytes) -> tuple[int, tuple[str, str]]:
        assert f".entry {name.decode()}(" in module
        return 0, (module, name.decode())

    def cuLaunchKernel(self, fn: tuple[str, str], gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                       shared: int, stream: str, params: int, extra: int) -> tuple[int]:
        kernel = self.kernels[fn[0]]
        assert (gx, gy, gz) == kernel.grid and (bx, by, bz) == kernel.block and stream == "stream"
        func = kernel.ir.func
        n = len(func.inputs) + len(func.outputs)
        slots = (ctypes.c_void_p * n).from_address(params)
        pointers = [ctypes.c_void_p.from_address(slots[i] or 0).value for i in range(n)]
        arrays = [self.memory[p] for p in pointers]  # type: ignore[index]
        ins = [a[: int(np.prod(t.shape))].reshape(t.shape) for a, t in zip(arrays, func.inputs, strict=False)]
        outs = simulate(kernel.ir, ins)
        for a, o in zip(arrays[len(func.inputs):], outs, strict=True):
            a[: o.size] = o.reshape(-1)
        self.launches.append((fn[1], tuple(pointers)))  # type: ignore[arg-type]
        return (0,)

    def cuStreamSynchronize(self, stream: str) -> tuple[int]:
        return (0,)


def test_cuda_executor_packs_launches_as_the_driver_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    op = MatMul(1, 32, 32, 16, bias=True)
    kernel = compile_kernel(op, SM80)
    fake = FakeCuda({kernel.ptx: kernel})
    monkeypatch.setattr(gpu_runtime, "driver_api", lambda: Driver(fake))
    executor = CudaExecutor()
    inputs = op.random_inputs(5)
    args = [executor.upload(x) for x in inputs] + [executor.empty((1, 32, 32))]
    executor.launch(kernel, args)
    got = executor.download(args[-1])
    np.testing.assert_allclose(got, op.reference(*inputs), rtol=2e-5, atol=2e-5)
    assert fake.launches == [("matmul", tuple(int(a.handle) for a in args))]


def test_simt_executor_writes_in_place() -> None:
    executor = SimtExecutor()
    op = Eltwise("relu", (2, 8))
    kernel = compile_kernel(op, SM80)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    src, out = executor.upload(x), executor.empty((16,))
    executor.launch(kernel, [src, out.view((2, 8))])
    np.testing.assert_array_equal(executor.download(out).reshape(2, 8), np.maximum(x, 0))


@pytest.mark.skipif(not AVAILABLE, reason=f"needs a GPU: {REASON}")
def test_a_kernel_on_the_gpu_matches_numpy() -> None:
    op = MatMul(1, 128, 128, 64, bias=True, act_lo=0.0)
    executor = CudaExecutor()
    kernel = compile_kernel(op, SM80)
    inputs = op.random_inputs(1)
    args: list[Any] = [executor.upload(x) for x in inputs] + [executor.empty((1, 128, 128))]
    executor.launch(kernel, args)
    np.testing.assert_allclose(executor.download(args[-1]), op.reference(*inputs), rtol=1e-4, atol=1e-4)
    assert executor.time_kernel(kernel, args, repeat=3) > 0
