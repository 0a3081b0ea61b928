"""The accelerator's code generation: loop IR after the passes -> Program (through
hw.program.ProgramBuilder)."""

from compiler.codegen.accel.emit import emit

__all__ = ["emit"]
