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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import llvmlite.binding as llvm


@dataclass(frozen=True)
class CpuTarget:
    """A CPU by LLVM's description: `triple`, `cpu` (LLVM's CPU name), `features` (+avx2,...)."""

    triple: str
    cpu: str
    features: str
    name = "cpu"  # a class attribute, not a field: the target's kind, as AcceleratorTarget's "accel"

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
                     llvm.get_host_cpu_features().flatten())
