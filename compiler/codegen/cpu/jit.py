"""LLVM IR text -> native code for this CPU, through llvmlite's MCJIT.

The target machine is the host's (compiler.target.cpu.host_target: its CPU name and features come
from LLVM's host detection), so the optimiser (the new pass manager at speed level `opt_level`,
loop and SLP vectorisation on) emits that CPU's vector instructions.  Each
kernel gets its own execution engine (MCJIT owns its target machine, so each also gets its own);
the engine must outlive every use of the function address, so `JitFunction` holds it.

Disk cache: `set_disk_cache(path)` (or the environment variable CODESIGN_KERNEL_CACHE; "off",
"0" or empty turn it off) keeps each kernel's object code in `path/<key>.o`, keyed by llvmlite's
and LLVM's versions, the host CPU, its features, the optimisation level and the IR text; a later
process loads the object and skips optimisation and code generation. The library leaves it off;
`codesign compile` and `codesign run` use `default_cache_dir()` ($CODESIGN_CACHE/kernels) unless
the variable says otherwise.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from compiler.target.cpu import CpuTarget, host_target
from hw.cache import SealedFolder

_LOCK = threading.Lock()  # LLVM compilation is not re-entrant through llvmlite
CACHE_ENV = "CODESIGN_KERNEL_CACHE"
# each kernel's object code, sealed (a damaged object handed to MCJIT would abort the process)
OBJECTS = SealedFolder("kernels", CACHE_ENV, b"codesign-kernel-object\0", ".o")


@dataclass
class JitFunction:
    """A compiled function: its address, and the engine that owns the code."""

    name: str
    address: int
    key: str
    optimized_ir: str
    compile_s: float
    from_disk: bool = False
    engine: llvm.ExecutionEngine | None = field(default=None, repr=False)


def cache_key(ir_text: str, opt_level: int) -> str:
    """What the object code depends on, hashed: tool versions, CPU, optimisation, the IR."""
    t = host_target()
    version = ".".join(str(v) for v in llvm.llvm_version_info)
    head = f"llvmlite {llvmlite.__version__} llvm {version} {t.triple} {t.cpu} {t.features} O{opt_level}\n"
    return hashlib.sha256((head + ir_text).encode()).hexdigest()


def set_disk_cache(path: str | Path | None) -> None:
    """Keep compiled objects under `path` (created if missing); None turns the disk cache off."""
    OBJECTS.use(path)


def default_cache_dir() -> Path:
    """Where the command line keeps compiled kernels: `kernels/` in the workbench's cache
    (`$CODESIGN_CACHE`, default ~/.cache/codesign, beside the Verilator builds); deleting it
    only costs compile time."""
    return OBJECTS.default_dir()


def _disk_dir() -> Path | None:
    return OBJECTS.directory()


def use_default_disk_cache() -> None:
    """The command line's choice: `default_cache_dir()` unless CODESIGN_KERNEL_CACHE is set (to
    a directory or to off) or a cache was set already; a home that cannot hold it leaves it off."""
    OBJECTS.use_default()


def compile_ir(ir_text: str, name: str, opt_level: int = 3, made: Made | None = None) -> JitFunction:
    """Optimise and JIT-compile `ir_text`; the address of its function `name`. `made`: the object
    code and optimised IR that `object_code` made of the same text elsewhere (a helper process,
    compiler.codegen.cpu.ahead): loaded as from the disk cache, and kept there."""
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, not {opt_level!r}")
    key = cache_key(ir_text, opt_level)
    cached = OBJECTS.read(key) if made is None else made.obj
    if made is not None:
        OBJECTS.write(key, made.obj)
    start = time.perf_counter()
    keep = None if _disk_dir() is None else lambda obj: OBJECTS.write(key, obj)
    engine, optimized = _finalized(ir_text, opt_level, cached, keep)
    with _LOCK:
        address = engine.get_function_address(name)
    seconds = time.perf_counter() - start
    if not address:
        raise RuntimeError(f"JIT compilation gave no address for {name}")
    if made is not None:
        optimized = made.optimized_ir
    return JitFunction(name, address, key, optimized, seconds, cached is not None and made is None, engine)


@dataclass(frozen=True)
class Made:
    """Object code compiled from a kernel's IR in another process, and its optimised IR."""

    obj: bytes
    optimized_ir: str


def object_code(ir_text: str, opt_level: int) -> Made:
    """What `compile_ir` makes of `ir_text`, as object code for another process to load (a
    helper's work: compiler.codegen.cpu.ahead). The same passes and target machine, so the
    object is the one `compile_ir` would make here."""
    made: list[bytes] = []
    _, optimized = _finalized(ir_text, opt_level, None, lambda obj: made.append(bytes(obj)))
    if len(made) != 1:
        raise RuntimeError(f"MCJIT handed over {len(made)} objects for one module")
    return Made(made[0], optimized)


def _finalized(ir_text: str, opt_level: int, cached: bytes | None,
               keep: Callable[[bytes], None] | None) -> tuple[llvm.ExecutionEngine, str]:
    """`ir_text` parsed and verified, optimised (unless `cached`, its object code, is given) and
    turned into native code by MCJIT: the engine and the optimised IR ('' from `cached`). `keep`
    receives the object code MCJIT makes (none is made from `cached`)."""
    with _LOCK:
        target = host_target()
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        if cached is None:
            _optimise(mod, target, opt_level)
        optimized = str(mod) if cached is None else ""
        engine = llvm.create_mcjit_compiler(mod, target.machine(opt_level))
        if keep is not None or cached is not None:
            engine.set_object_cache(lambda _m, obj: keep(obj) if keep is not None else None,
                                    lambda _m: cached)
        engine.finalize_object()
    return engine, optimized


def _optimise(mod: llvm.ModuleRef, target: CpuTarget, opt_level: int) -> None:
    tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    tuning.loop_vectorization = opt_level >= 2
    tuning.slp_vectorization = opt_level >= 2
    tuning.loop_unrolling = opt_level >= 2
    machine = target.machine(opt_level)  # held here: the pass builder borrows it
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(mod, builder)
