"""`GpuTarget`: what an NVIDIA GPU offers the compiler, from the device or from a named preset.

The schedules and the GPU lowering read only this record: the compute capability (the PTX
`sm_XY` the code is emitted for), the shared memory a block may allocate statically, the
registers of a thread and of a block, the warp size, the threads a block may hold, the SM count
and the clock (for the fp32 peak a measurement is compared with).  `gpu_preset("sm_80")` and
`gpu_preset("sm_90")` describe an A100 and an H100 (SXM) for offline compilation, so PTX can
be emitted and assembled without a GPU; compiler.runtime.gpu_driver's `device_target()` asks the
driver (through cuda-bindings) for the record of a real device.
"""

from __future__ import annotations

from dataclasses import dataclass

from hw.errors import InputError

STATIC_SHARED_BYTES = 48 * 1024  # a `.shared` array is static: 48 KiB per block on every sm_XY


@dataclass(frozen=True)
class GpuTarget:
    """An NVIDIA GPU: compute capability (major, minor), limits per block and thread, SM count,
    clock; `device` names where it came from ("preset" or the driver's device name)."""

    major: int
    minor: int
    sm_count: int
    clock_khz: int
    shared_bytes_per_block: int = STATIC_SHARED_BYTES
    registers_per_block: int = 65536
    registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    warp_size: int = 32
    fp32_lanes_per_sm: int = 64  # FP32 FMA units per SM: 64 on sm_80, 128 on sm_86 and newer
    device: str = "preset"
    name = "gpu"  # a class attribute, not a field: the target's kind

    @property
    def arch(self) -> str:
        """The PTX target, `sm_80`."""
        return f"sm_{self.major}{self.minor}"

    @property
    def ptx_features(self) -> str:
        """LLVM's NVPTX feature string: PTX ISA 8.0 (CUDA 12.0 drivers and newer load it)."""
        return "+ptx80"

    @property
    def peak_fp32_flops(self) -> float:
        """Fused multiply-adds per second x 2 over every SM at the reported clock."""
        return 2.0 * self.fp32_lanes_per_sm * self.sm_count * self.clock_khz * 1e3

    def to_json(self) -> dict[str, object]:
        return {"arch": self.arch, "device": self.device, "sm_count": self.sm_count,
                "clock_khz": self.clock_khz, "shared_bytes_per_block": self.shared_bytes_per_block,
                "registers_per_block": self.registers_per_block,
                "registers_per_thread": self.registers_per_thread,
                "max_threads_per_block": self.max_threads_per_block, "warp_size": self.warp_size,
                "peak_fp32_gflops": round(self.peak_fp32_flops / 1e9, 1)}


PRESETS: dict[str, GpuTarget] = {
    "sm_80": GpuTarget(8, 0, sm_count=108, clock_khz=1_410_000, fp32_lanes_per_sm=64),  # A100 SXM
    "sm_90": GpuTarget(9, 0, sm_count=132, clock_khz=1_980_000, fp32_lanes_per_sm=128),  # H100 SXM
}


def gpu_preset(arch: str) -> GpuTarget:
    """The named preset (`sm_80`, `sm_90`), for compiling without a device."""
    if arch not in PRESETS:
        raise InputError(f"unknown GPU preset {arch!r}; known: {', '.join(PRESETS)}")
    return PRESETS[arch]


def fp32_lanes(major: int, minor: int) -> int:
    """FP32 units per SM by compute capability (CUDA programming guide, arithmetic throughput)."""
    return 64 if (major, minor) in ((6, 0), (7, 0), (7, 2), (7, 5), (8, 0)) else 128


__all__ = ["PRESETS", "GpuTarget", "fp32_lanes", "gpu_preset"]
