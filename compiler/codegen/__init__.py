"""Code generation: loop IR -> Program (through hw.program.ProgramBuilder)."""

from compiler.codegen.emit import emit

__all__ = ["emit"]
