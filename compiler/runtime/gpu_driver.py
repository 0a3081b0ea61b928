"""The CUDA driver API through cuda-bindings, imported lazily and initialised once.

`driver_api()` returns a `Driver`: the `cuda.bindings.driver` module's functions plus `check`,
which turns a (CUresult, value...) tuple into the value or a GpuUnavailableError naming the call.
Importing this module needs nothing; calling `driver_api()` on a machine without cuda-bindings,
without an NVIDIA driver or without a device raises GpuUnavailableError with the reason.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from compiler.errors import GpuUnavailableError
from compiler.target.gpu import STATIC_SHARED_BYTES, GpuTarget, fp32_lanes


class Driver:
    """`cuda.bindings.driver` (attribute access passes through) with result checking."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def check(self, result: Any, what: str) -> Any:
        """The value of a driver call's `(err, value...)` result, or GpuUnavailableError."""
        items = result if isinstance(result, tuple) else (result,)
        err, values = items[0], items[1:]
        if int(err) != 0:
            _, text = self._module.cuGetErrorString(err)
            reason = text.decode() if isinstance(text, bytes) else str(err)
            raise GpuUnavailableError(f"CUDA driver: {what} failed: {reason}")
        if not values:
            return None
        return values[0] if len(values) == 1 else values


@functools.cache
def driver_api() -> Driver:
    """The initialised driver API (once per process), or GpuUnavailableError saying why not."""
    try:
        from cuda.bindings import driver
    except ImportError:
        raise GpuUnavailableError("no GPU runtime: cuda-bindings is not installed (pip install "
                                  "'cuda-bindings<13' for CUDA 12 drivers)") from None
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # cuda-pathfinder raises when libcuda.so is absent
        raise GpuUnavailableError(f"no GPU: the NVIDIA driver library does not load "
                                  f"({type(exc).__name__})") from None
    drv = Driver(driver)
    drv.check((err,), "cuInit")
    count = drv.check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    if not count:
        raise GpuUnavailableError("no GPU: the NVIDIA driver reports no devices")
    return drv


def gpu_available() -> tuple[bool, str]:
    """(True, "") where a GPU can be used, else (False, the reason): for skips and messages."""
    try:
        driver_api()
    except GpuUnavailableError as exc:
        return False, str(exc)
    return True, ""


@functools.cache
def device_target(ordinal: int = 0) -> GpuTarget:
    """The target of GPU `ordinal` as the driver reports it; GpuUnavailableError (with the
    reason) where cuda-bindings is missing, no driver loads or there is no such device."""
    drv = driver_api()
    attr = drv.CUdevice_attribute
    dev = drv.check(drv.cuDeviceGet(ordinal), f"device {ordinal}")

    def get(name: str) -> int:
        return int(drv.check(drv.cuDeviceGetAttribute(getattr(attr, name), dev), name))

    major = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
    minor = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
    raw = drv.check(drv.cuDeviceGetName(256, dev), "device name")
    base = GpuTarget(major, minor, get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                     get("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"), fp32_lanes_per_sm=fp32_lanes(major, minor),
                     device=bytes(raw).split(b"\0")[0].decode())
    return replace(
        base,
        shared_bytes_per_block=min(STATIC_SHARED_BYTES,
                                   get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK")),
        registers_per_block=get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
        max_threads_per_block=get("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        warp_size=get("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
    )
