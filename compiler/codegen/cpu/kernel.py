"""`HostKernel`: a JIT-compiled host kernel called on numpy arrays; the in-process kernel cache.

`compile_func(func)` turns host loop IR (compiler.lower.cpu) into LLVM IR, and compiles it
unless a kernel with the same key was compiled before in this process: the key hashes the LLVM IR
text (which spells out every shape, dtype, constant and loop of the kernel), the optimisation
level, the CPU and the tool versions (jit.cache_key).  Compiled functions are never evicted: a
model has a few dozen host kernels at most.  Inside `ahead.compiling_ahead()` a kernel that must be
compiled is handed to a helper process and its code attached when the block ends (or when it is
first called, if that is sooner).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.codegen.cpu import ahead
from compiler.codegen.cpu.jit import OBJECTS, JitFunction, cache_key, compile_ir
from compiler.codegen.llvm.emit import emit_module
from compiler.lower.lower import LoweredFunc
from compiler.target.cpu import host_target
from compiler.te.tensor import Tensor

_NP_DTYPES = {d: np.dtype(d) for d in ("int8", "uint8", "int16", "int32", "int64", "float32")}


@dataclass(frozen=True)
class ArgSpec:
    """One array argument: its name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def np_dtype(self) -> np.dtype:
        return _NP_DTYPES[self.dtype]

    @classmethod
    def of(cls, t: Tensor) -> ArgSpec:
        return cls(t.name, t.shape, t.dtype)


class HostKernel:
    """Native code for one kernel.  `kernel(*inputs)` returns the output (a tuple when there are
    several), freshly allocated, or fills the arrays given as `out`.  Arrays must have exactly the
    declared dtype and shape and be C-contiguous; outputs must not overlap inputs."""

    def __init__(self, func: LoweredFunc, jit: JitFunction | ahead.Job, llvm_ir: str) -> None:
        self.name = func.name
        self.inputs = [ArgSpec.of(t) for t in func.inputs]
        self.outputs = [ArgSpec.of(t) for t in func.outputs]
        self.func, self.llvm_ir = func, llvm_ir
        self._job = jit if isinstance(jit, ahead.Job) else None
        self._jit = jit if isinstance(jit, JitFunction) else None
        self._cfunc_: Callable[..., None] | None = None

    @property
    def jit(self) -> JitFunction:
        """The compiled function (a helper's kernel is resolved now if it was not yet)."""
        if self._jit is None:
            assert self._job is not None
            self._jit = self._job.result()
        return self._jit

    @property
    def _cfunc(self) -> Callable[..., None]:
        if self._cfunc_ is None:
            argtypes = [ctypes.c_void_p] * (len(self.inputs) + len(self.outputs))
            self._cfunc_ = ctypes.CFUNCTYPE(None, *argtypes)(self.jit.address)
        return self._cfunc_

    @property
    def optimized_ir(self) -> str:
        """The LLVM IR after optimisation ('' when the object came from the disk cache)."""
        return self.jit.optimized_ir

    @property
    def compile_s(self) -> float:
        return self.jit.compile_s

    def __call__(self, *inputs: np.ndarray, out: np.ndarray | Sequence[np.ndarray] | None = None
                 ) -> np.ndarray | tuple[np.ndarray, ...]:
        if len(inputs) != len(self.inputs):
            names = ", ".join(a.name for a in self.inputs)
            raise ValueError(f"kernel {self.name}: expected {len(self.inputs)} input arrays "
                             f"({names}), got {len(inputs)}")
        if out is None:
            outs = [np.empty(a.shape, a.np_dtype) for a in self.outputs]
        else:
            outs = [out] if isinstance(out, np.ndarray) else list(out)
            if len(outs) != len(self.outputs):
                raise ValueError(f"kernel {self.name}: expected {len(self.outputs)} output "
                                 f"arrays, got {len(outs)}")
        self.run(*inputs, *outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, *arrays: np.ndarray) -> None:
        """Run on all arguments, inputs then outputs, after checking each."""
        self._check_all(arrays)
        self._cfunc(*(a.ctypes.data for a in arrays))

    def _check_all(self, arrays: Sequence[np.ndarray]) -> None:
        specs = self.inputs + self.outputs
        if len(arrays) != len(specs):
            raise ValueError(f"kernel {self.name}: expected {len(specs)} arrays (inputs then "
                             f"outputs), got {len(arrays)}")
        n_in = len(self.inputs)
        for k, (a, spec) in enumerate(zip(arrays, specs, strict=True)):
            self._check(a, spec, "input" if k < n_in else "output")
        for k in range(n_in, len(arrays)):  # arguments are noalias: an output overlaps nothing
            if not arrays[k].flags.writeable:
                raise ValueError(f"kernel {self.name}: output {specs[k].name} is read-only")
            for j in range(k):
                if np.may_share_memory(arrays[k], arrays[j]):
                    role = "input" if j < n_in else "output"
                    raise ValueError(f"kernel {self.name}: output {specs[k].name} overlaps {role} "
                                     f"{specs[j].name}")

    def bind(self, *arrays: np.ndarray) -> Callable[[], None]:
        """The kernel on fixed arrays (inputs then outputs, checked now as `run` checks them): a
        call without arguments runs it on whatever those arrays hold then, with no checks, for a
        runtime that plans its buffers once (the function holds the arrays alive)."""
        self._check_all(arrays)
        cfunc, addresses = self._cfunc, tuple(a.ctypes.data for a in arrays)

        def call(_keep: tuple[np.ndarray, ...] = arrays) -> None:
            cfunc(*addresses)

        return call

    def _check(self, a: np.ndarray, spec: ArgSpec, role: str) -> None:
        # the common case costs a few attribute reads; messages are built only to raise
        ok = isinstance(a, np.ndarray) and a.dtype == spec.np_dtype and a.shape == spec.shape
        if ok and a.flags.c_contiguous:
            return
        where = f"kernel {self.name}: {role} {spec.name}"
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{where} must be a numpy array, not {type(a).__name__}")
        if a.dtype != spec.np_dtype:
            raise ValueError(f"{where} has dtype {a.dtype}, expected {spec.dtype}")
        if a.shape != spec.shape:
            raise ValueError(f"{where} has shape {a.shape}, expected {spec.shape}")
        raise ValueError(f"{where} is not C-contiguous; pass np.ascontiguousarray of it")

    def __repr__(self) -> str:
        args = ", ".join(f"{a.name}: {a.dtype}{list(a.shape)}" for a in self.inputs + self.outputs)
        return f"HostKernel({self.name}({args}))"


@dataclass(frozen=True)
class CacheInfo:
    """This process's kernel cache: lookups that found a kernel, lookups that compiled one,
    kernels held, and how many of the compiled ones came from the disk cache."""

    hits: int
    misses: int
    size: int
    from_disk: int = 0


_CACHE: dict[str, JitFunction] = {}
_STATS = {"hits": 0, "misses": 0, "from_disk": 0}
_CACHE_LOCK = threading.Lock()


def compile_func(func: LoweredFunc, opt_level: int = 3, contract: bool = False) -> HostKernel:
    """The kernel of host loop IR `func`, compiled once per process for each distinct key;
    `contract`: products and sums may fuse into FMAs (compiler.codegen.llvm.emit_module)."""
    llvm_ir = str(emit_module(func, host_target().triple, contract))
    key = cache_key(llvm_ir, opt_level)
    batch = ahead.current()
    with _CACHE_LOCK:
        jit = _CACHE.get(key)
        found = jit is not None or (batch is not None and key in batch.jobs)
        _STATS["hits" if found else "misses"] += 1
    if jit is not None:
        return HostKernel(func, jit, llvm_ir)
    if batch is not None and not OBJECTS.has(key):  # a disk cache's object loads faster here
        return HostKernel(func, batch.submit(key, llvm_ir, func.name, opt_level, _keep), llvm_ir)
    return HostKernel(func, _keep(compile_ir(llvm_ir, func.name, opt_level)), llvm_ir)


def _keep(jit: JitFunction) -> JitFunction:
    """The process's function for `jit`'s key: `jit`, or one compiled for the key before."""
    with _CACHE_LOCK:
        if jit.key not in _CACHE:
            _STATS["from_disk"] += jit.from_disk
            _CACHE[jit.key] = jit
        return _CACHE[jit.key]


def cache_info() -> CacheInfo:
    with _CACHE_LOCK:
        return CacheInfo(_STATS["hits"], _STATS["misses"], len(_CACHE), _STATS["from_disk"])
