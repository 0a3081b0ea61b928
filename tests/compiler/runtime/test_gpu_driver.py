"""The CUDA driver wrapper: without a GPU every entry point says why (tests that need a GPU skip
with that reason); result checking turns driver errors into GpuUnavailableError."""

from __future__ import annotations

import pytest

from compiler.errors import GpuUnavailableError
from compiler.runtime.gpu_driver import Driver, device_target, gpu_available

AVAILABLE, REASON = gpu_available()


@pytest.mark.skipif(AVAILABLE, reason="a GPU is present: the no-GPU path is not taken")
def test_without_a_gpu_the_reason_is_given() -> None:
    assert REASON.startswith(("no GPU", "no GPU runtime", "CUDA driver"))
    with pytest.raises(GpuUnavailableError, match=r"no GPU|CUDA driver"):
        device_target()


@pytest.mark.skipif(not AVAILABLE, reason=f"needs a GPU: {REASON}")
def test_the_device_describes_itself() -> None:
    target = device_target()
    assert target.major >= 7 and target.sm_count > 0 and target.warp_size == 32
    assert target.device != "preset"


class _FakeDriver:
    """A driver module whose calls return (error code, value), as cuda-bindings' do."""

    @staticmethod
    def cuGetErrorString(err: int) -> tuple[int, bytes]:
        return 0, b"invalid device ordinal"


def test_check_returns_values_and_names_a_failing_call() -> None:
    drv = Driver(_FakeDriver())
    assert drv.check((0, 5), "cuDeviceGetCount") == 5
    assert drv.check((0, 1, 2), "two") == (1, 2)
    assert drv.check((0,), "cuInit") is None
    with pytest.raises(GpuUnavailableError, match=r"CUDA driver: cuDeviceGet failed: invalid device ordinal"):
        drv.check((101, None), "cuDeviceGet")


def test_missing_bindings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from compiler.runtime import gpu_driver

    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails as if not installed
    with pytest.raises(GpuUnavailableError, match=r"no GPU runtime: cuda-bindings is not installed "
                                                  r"\(pip install 'cuda-bindings<13' for CUDA 12 drivers\)"):
        gpu_driver.driver_api.__wrapped__()


def test_a_driver_without_devices_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from compiler.runtime import gpu_driver

    fake = types.SimpleNamespace(cuInit=lambda flags: (0,), cuDeviceGetCount=lambda: (0, 0),
                                 cuGetErrorString=lambda err: (0, b""))
    package = types.ModuleType("cuda.bindings")
    package.driver = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings", package)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)  # type: ignore[arg-type]
    with pytest.raises(GpuUnavailableError, match=r"no GPU: the NVIDIA driver reports no devices"):
        gpu_driver.driver_api.__wrapped__()
