"""CPU code generation: loop IR -> LLVM IR (compiler.codegen.llvm) -> native code for this machine
(MCJIT, jit.py), wrapped as kernels called on numpy arrays with an in-process and a disk cache
(kernel.py); `compiling_ahead()` lets a helper process compile a model's kernels while the caller
plans on (ahead.py)."""

from compiler.codegen.cpu.ahead import compiling_ahead
from compiler.codegen.cpu.ahead import use_default as use_default_jit_helper
from compiler.codegen.cpu.jit import (
    default_cache_dir,
    set_disk_cache,
    use_default_disk_cache,
)
from compiler.codegen.cpu.kernel import ArgSpec, CacheInfo, HostKernel, cache_info, compile_func

__all__ = ["ArgSpec", "CacheInfo", "HostKernel", "cache_info", "compile_func", "compiling_ahead",
           "default_cache_dir", "set_disk_cache", "use_default_disk_cache", "use_default_jit_helper"]
