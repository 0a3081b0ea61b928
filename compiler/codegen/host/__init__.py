"""Host code generation: host loop IR -> LLVM IR (llvmlite.ir) -> native code (MCJIT)."""

from compiler.codegen.host.emit_llvm import emit_module
from compiler.codegen.host.jit import (
    HostTarget,
    default_cache_dir,
    host_target,
    set_disk_cache,
    use_default_disk_cache,
)
from compiler.codegen.host.kernel import ArgSpec, CacheInfo, HostKernel, cache_info, compile_func

__all__ = ["ArgSpec", "CacheInfo", "HostKernel", "HostTarget", "cache_info", "compile_func",
           "default_cache_dir", "emit_module", "host_target", "set_disk_cache",
           "use_default_disk_cache"]
