"""Code generation, per target: compiler.codegen.accel (loop IR after the passes -> Program),
compiler.codegen.llvm (loop IR -> LLVM IR, for any target LLVM compiles for) and
compiler.codegen.cpu (LLVM IR -> native code for this CPU, and the kernels that run it)."""
