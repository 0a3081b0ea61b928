"""`CpuTarget`: what the CPU running the compiler offers it, as LLVM detects it.

Its triple, CPU name and CPU features (`znver4` with AVX-512 on the reference machine), from
which the code generator (compiler.codegen.cpu) makes LLVM target machines, so the optimiser
emits that CPU's vector instructions.  `host_target()` detects this machine's once per process;
nothing in lower/ or ops/cpu/ reads it.  LLVM is imported when first asked for, so importing
compiler.target for the accelerator does not load it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import llvmlite.binding as llvm


@dataclass(frozen=True)
class CpuTarget:
    """A CPU by LLVM's description: `triple`, `cpu` (LLVM's CPU name), `features` (+avx2,...)."""

    triple: str
    cpu: str
    features: str
    l1d_bytes: int = 32 * 1024  # per core (the host's from sysfs: `host_target`)
    l2_bytes: int = 512 * 1024
    name = "cpu"  # a class attribute, not a field: the target's kind, as AcceleratorTarget's "accel"

    def has(self, feature: str) -> bool:
        """Whether LLVM's feature string enables `feature` ("avx2", "avx512f", ...)."""
        return f"+{feature}" in self.features.split(",")

    @property
    def vector_bits(self) -> int:
        """The widest vector register the schedules use: 512 (AVX-512), 256 (AVX) or 128."""
        if self.has("avx512f"):
            return 512
        return 256 if self.has("avx") else 128

    @property
    def vector_registers(self) -> int:
        """Vector registers of that width: 32 with AVX-512, else 16."""
        return 32 if self.has("avx512f") else 16

    def lanes(self, dtype_bits: int) -> int:
        """Elements of `dtype_bits` bits in one vector register."""
        return self.vector_bits // dtype_bits

    def to_json(self) -> dict[str, object]:
        return {"triple": self.triple, "cpu": self.cpu, "vector_bits": self.vector_bits,
                "vector_registers": self.vector_registers, "l1d_bytes": self.l1d_bytes,
                "l2_bytes": self.l2_bytes}

    def machine(self, opt_level: int) -> llvm.TargetMachine:
        """An LLVM target machine for this CPU at optimisation level `opt_level`, for the JIT."""
        import llvmlite.binding as llvm

        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt_level,
                                            jit=True)


@functools.cache
def host_target() -> CpuTarget:
    """This machine's triple, CPU name and CPU features, as LLVM detects them (once)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()  # llvmlite 0.50 still needs these (llvm.initialize raises)
    llvm.initialize_native_asmprinter()
    return CpuTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                     llvm.get_host_cpu_features().flatten(), *_cache_sizes())


def _cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> tuple[int, int]:
    """(L1 data, L2) bytes of one core from Linux's sysfs; the defaults where it says nothing."""
    sizes = {1: 32 * 1024, 2: 512 * 1024}
    for index in sorted(Path(root).glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        if level in sizes and kind in ("Data", "Unified") and text.rstrip("KM").isdigit():
            sizes[level] = int(text.rstrip("KM")) * scale
    return sizes[1], sizes[2]
