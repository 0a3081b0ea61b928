"""GPU code generation: GPU loop IR -> NVPTX LLVM IR (emit.py) -> PTX -> cubin through ptxas
(ptx.py).  Nothing here needs a GPU; loading and launching are compiler.runtime.gpu's."""

from compiler.codegen.gpu.emit import emit_kernel
from compiler.codegen.gpu.ptx import PtxasInfo, assemble, find_ptxas, parse_ptxas, to_ptx

__all__ = ["PtxasInfo", "assemble", "emit_kernel", "find_ptxas", "parse_ptxas", "to_ptx"]
