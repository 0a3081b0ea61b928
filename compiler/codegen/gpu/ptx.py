"""NVPTX LLVM IR -> PTX (llvmlite's NVPTX back end) -> cubin (`ptxas`, offline, no GPU needed).

`to_ptx(module, target)` optimises the module at O3 for the target's `sm_XY` and emits PTX text;
`assemble(ptx, arch)` runs ptxas -v and returns the cubin with the registers, spill bytes,
shared and stack bytes it reports per kernel.  `find_ptxas()` looks for ptxas in the
`nvidia-cuda-nvcc-cu12` wheel first (the `gpu` extra installs it), then $CUDA_HOME/bin, then
$PATH; None where there is none (tests that need it skip, saying so).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llvmlite import ir

from compiler.target.gpu import GpuTarget
from hw.verilog import ToolchainError


@dataclass(frozen=True)
class PtxasInfo:
    """What ptxas reports for one kernel: registers per thread, bytes spilled (stores + loads),
    static shared bytes, stack frame bytes."""

    kernel: str
    arch: str
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int
    stack_bytes: int

    def to_json(self) -> dict[str, object]:
        return {"kernel": self.kernel, "arch": self.arch, "registers": self.registers,
                "spill_store_bytes": self.spill_store_bytes, "spill_load_bytes": self.spill_load_bytes,
                "shared_bytes": self.shared_bytes, "stack_bytes": self.stack_bytes}


@functools.cache
def _initialise() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def to_ptx(module: ir.Module, target: GpuTarget, opt_level: int = 3) -> str:
    """PTX text of `module` for `target` (O3 through LLVM's new pass manager)."""
    import llvmlite.binding as llvm

    _initialise()
    ref = llvm.parse_assembly(str(module))
    ref.verify()
    machine = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu=target.arch, features=target.ptx_features, opt=opt_level)
    tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(ref, builder)
    return str(machine.emit_assembly(ref))


@functools.cache
def find_ptxas() -> str | None:
    """The ptxas to use: the nvidia-cuda-nvcc-cu12 wheel's, $CUDA_HOME's, or $PATH's."""
    try:
        import nvidia.cuda_nvcc as nvcc

        for root in nvcc.__path__:
            candidate = Path(root) / "bin" / "ptxas"
            if candidate.is_file():
                return str(candidate)
    except ImportError:
        pass
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "ptxas").is_file():
        return str(Path(home) / "bin" / "ptxas")
    return shutil.which("ptxas")


_INFO = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")


def assemble(ptx: str, arch: str, ptxas: str | None = None) -> tuple[bytes, list[PtxasInfo]]:
    """The cubin of `ptx` for `arch` and ptxas's report per kernel; ToolchainError where ptxas is
    missing or rejects the PTX (its message attached)."""
    tool = ptxas or find_ptxas()
    if tool is None:
        raise ToolchainError("ptxas not found: install the gpu extra (nvidia-cuda-nvcc-cu12) or "
                             "put CUDA's bin on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        proc = subprocess.run([tool, f"-arch={arch}", "-v", "-O3", str(src), "-o", str(out)],
                              capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise ToolchainError(f"ptxas -arch={arch} rejected the PTX: {proc.stderr.strip()[:2000]}")
        return out.read_bytes(), parse_ptxas(proc.stdout + proc.stderr)


def parse_ptxas(text: str) -> list[PtxasInfo]:
    """ptxas -v's report, one record per kernel (the lines after 'Compiling entry function')."""
    infos: list[PtxasInfo] = []
    name = arch = ""
    spill = (0, 0, 0)
    for line in text.splitlines():
        if m := _INFO.search(line):
            name, arch = m.group(1), m.group(2)
        elif m := _SPILL.search(line):
            spill = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) and name:
            smem = _SMEM.search(m.group(2))
            infos.append(PtxasInfo(name, arch, int(m.group(1)), spill[1], spill[2],
                                   int(smem.group(1)) if smem else 0, spill[0]))
            name, spill = "", (0, 0, 0)
    return infos
