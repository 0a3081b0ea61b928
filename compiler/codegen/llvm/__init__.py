"""Loop IR -> LLVM IR (llvmlite.ir), shared by the targets LLVM compiles for.

`emit_module(func, triple)` writes one function of dense row-major pointer arguments; `fmath`
writes the TE language's float math calls inline.  Nothing here compiles or runs code: the CPU
target's MCJIT and kernel cache are in compiler.codegen.cpu.
"""

from compiler.codegen.llvm.emit import emit_module

__all__ = ["emit_module"]
