"""A GPU kernel's loop IR run on the CPU with numpy, every thread of the grid in lockstep.

This checks what the GPU lowering decides (the launch, bound loops, guards, shared and local
tiles, cooperative fetches, barriers, indexing) without a GPU, for small shapes: each statement
runs for all threads at once (a numpy array over the grid's threads), serial and unrolled loops
run in Python, a loop bound to a thread tag takes the thread's index and masks the threads its
extent leaves out.  Float arithmetic is float32 (no fused multiply-adds: results agree with the
GPU's within float32 rounding).

It also rejects what would be wrong on a GPU even where lockstep execution hides it, raising
SimtError naming the statement:
- a read or write outside a tensor or buffer by a thread that executes it;
- two threads writing one global element in the same statement (a reduction bound to threads);
- a barrier that not every thread of the block reaches;
- a race on shared memory: a thread reading (or writing) an element another thread of its block
  wrote since the last barrier.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.lower.gpu import GpuKernelIR
from compiler.schedule.records import THREAD_TAGS
from compiler.te import expr as E
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S

_CALLS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "fabs": np.abs,
          "floor": np.floor, "rint": np.rint, "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
          "erf": np.vectorize(math.erf, otypes=[np.float64])}
_NP = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
       "int32": np.int32, "int64": np.int64, "bool": np.bool_}


class SimtError(AssertionError):
    """The kernel would misbehave on a GPU (a compiler bug: the message names the statement)."""


class _Memory:
    """One tensor or buffer, flat: global (one copy), shared (one per block), local (per thread)."""

    def __init__(self, t: Tensor, scope: str, copies: int, data: np.ndarray | None = None) -> None:
        self.tensor, self.scope = t, scope
        self.elems = int(np.prod(t.shape))
        self.data: np.ndarray
        if data is not None:
            self.data = np.ascontiguousarray(data, dtype=_NP[t.dtype]).reshape(-1).copy()
        else:
            self.data = np.full(copies * self.elems, np.nan if t.dtype == "float32" else 0,
                                dtype=_NP[t.dtype])
        self.writer = np.full(copies * self.elems, -1, dtype=np.int64) if scope == "shared" else None


def simulate(kernel: GpuKernelIR, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of `kernel` on `inputs` (in its argument order), run thread by thread in
    lockstep; SimtError where it would misbehave on a GPU."""
    return _Simt(kernel, inputs).run()


class _Simt:
    def __init__(self, kernel: GpuKernelIR, inputs: Sequence[np.ndarray]) -> None:
        func = kernel.func
        self.kernel = kernel
        self.dims = kernel.dims()
        blocks, threads = math.prod(kernel.grid), kernel.threads
        n = blocks * threads
        flat = np.arange(n, dtype=np.int64)
        self.block_id, self.thread_id = flat // threads, flat % threads
        self.ids = _tag_ids(kernel, self.block_id, self.thread_id)
        self.n = n
        self.mem: dict[str, _Memory] = {}
        for t, a in zip(func.inputs, inputs, strict=True):
            if tuple(a.shape) != tuple(t.shape):
                raise ValueError(f"input {t.name}: shape {a.shape}, expected {t.shape}")
            self.mem[t.name] = _Memory(t, "global", 1, a)
        for t in func.outputs:
            self.mem[t.name] = _Memory(t, "global", 1)
        for buf in func.buffers.values():
            copies = blocks if buf.scope == "shared" else n
            self.mem[buf.name] = _Memory(buf, buf.scope, copies)
        self.env: dict[E.Var, np.ndarray | int] = {}

    def run(self) -> list[np.ndarray]:
        self._stmt(self.kernel.func.body, np.ones(self.n, dtype=bool))
        return [self.mem[t.name].data.reshape(t.shape) for t in self.kernel.func.outputs]

    # -- statements ---------------------------------------------------------------------------
    def _stmt(self, node: S.Stmt, mask: np.ndarray) -> None:
        if isinstance(node, S.Seq):
            for s in node.stmts:
                self._stmt(s, mask)
        elif isinstance(node, S.For):
            self._loop(node, mask)
        elif isinstance(node, S.Attr) and node.key == "barrier":
            self._barrier(node, mask)
            self._stmt(node.body, mask)
            self._barrier(node, mask)
        elif isinstance(node, S.Store):
            self._store(node, mask)
        else:
            raise SimtError(f"{type(node).__name__} is not GPU loop IR")

    def _loop(self, node: S.For, mask: np.ndarray) -> None:
        if node.kind in THREAD_TAGS:
            ids = self.ids[node.kind]
            self.env[node.var] = ids
            inner = mask & (ids < node.extent) if node.extent < self.dims[node.kind] else mask
            self._stmt(node.body, inner)
        else:
            for k in range(node.extent):
                self.env[node.var] = k
                self._stmt(node.body, mask)
        del self.env[node.var]

    def _barrier(self, node: S.Attr, mask: np.ndarray) -> None:
        if not mask.all():
            raise SimtError(f"barrier around {node.stage}: only {int(mask.sum())} of {self.n} "
                            "threads reach it")
        for m in self.mem.values():
            if m.writer is not None:
                m.writer[:] = -1

    def _store(self, node: S.Store, mask: np.ndarray) -> None:
        value = self._expr(node.value, mask)
        m = self.mem[node.tensor.name]
        at = self._address(m, node.indices, mask, f"store to {node.tensor.name}")
        lanes = np.nonzero(mask)[0]
        where, vals = at[lanes], np.broadcast_to(value, (self.n,))[lanes]
        if m.scope == "global" and len(np.unique(where)) != len(where):
            raise SimtError(f"store to {node.tensor.name}: several threads write one element in "
                            "the same statement")
        if m.writer is not None:
            self._check_race(m, where, lanes, f"store to {node.tensor.name}")
            m.writer[where] = self.thread_id[lanes]
        m.data[where] = vals.astype(m.data.dtype)

    def _check_race(self, m: _Memory, where: np.ndarray, lanes: np.ndarray, what: str) -> None:
        assert m.writer is not None
        wrote = m.writer[where]
        other = (wrote >= 0) & (wrote != self.thread_id[lanes])
        if other.any():
            raise SimtError(f"{what}: thread {int(self.thread_id[lanes][other][0])} touches shared "
                            f"{m.tensor.name} element written by thread {int(wrote[other][0])} "
                            "since the last barrier")

    def _address(self, m: _Memory, indices: tuple[E.Expr, ...], mask: np.ndarray, what: str) -> np.ndarray:
        flat = np.zeros(self.n, dtype=np.int64)
        for size, idx in zip(m.tensor.shape, indices, strict=True):
            v = np.broadcast_to(np.asarray(self._expr(idx, mask), dtype=np.int64), (self.n,))
            bad = mask & ((v < 0) | (v >= size))
            if bad.any():
                raise SimtError(f"{what}: index {int(v[bad][0])} outside [0, {size}) in {idx}")
            flat = flat * size + v
        if m.scope == "shared":
            flat = flat + self.block_id * m.elems
        elif m.scope == "local":
            flat = flat + np.arange(self.n, dtype=np.int64) * m.elems
        return np.where(mask, flat, 0)

    # -- expressions --------------------------------------------------------------------------
    def _expr(self, e: E.Expr, mask: np.ndarray) -> np.ndarray | int | float:
        if isinstance(e, E.Const):
            return e.value
        if isinstance(e, E.FloatConst):
            return float(np.float32(e.value))
        if isinstance(e, E.Var):
            return self.env[e]
        if isinstance(e, E.Load):
            m = self.mem[e.tensor.name]
            at = self._address(m, e.indices, mask, f"load of {e.tensor.name}")
            if m.writer is not None:
                lanes = np.nonzero(mask)[0]
                self._check_race(m, at[lanes], lanes, f"load of {e.tensor.name}")
            return m.data[at]
        if isinstance(e, E.Bin):
            return self._bin(e, mask)
        if isinstance(e, E.Cast):
            return np.asarray(self._expr(e.value, mask)).astype(_NP[e.dtype])
        if isinstance(e, E.Select):
            cond = np.broadcast_to(np.asarray(self._expr(e.cond, mask), dtype=bool), (self.n,))
            then = self._expr(e.then, mask & cond)
            other = self._expr(e.other, mask & ~cond)
            return np.where(cond, then, other)
        if isinstance(e, E.Call):
            value = _CALLS[e.name](np.asarray(self._expr(e.args[0], mask), dtype=np.float32))
            return np.asarray(value).astype(np.float32)
        raise SimtError(f"cannot interpret {e}")

    def _bin(self, e: E.Bin, mask: np.ndarray) -> Any:
        a: Any = self._expr(e.a, mask)
        b: Any = self._expr(e.b, mask)
        if E.is_float(e.a.dtype):
            a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
        with np.errstate(all="ignore"):
            return _BIN[e.op](a, b)


_BIN: dict[str, Callable[[Any, Any], Any]] = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
        "//": lambda a, b: np.floor_divide(a, np.where(np.asarray(b) == 0, 1, b)),
        "%": lambda a, b: np.mod(a, np.where(np.asarray(b) == 0, 1, b)),
        "min": np.minimum, "max": np.maximum, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
        "and": np.logical_and, "or": np.logical_or, ">>": np.right_shift, "<<": np.left_shift}


def _tag_ids(kernel: GpuKernelIR, block: np.ndarray, thread: np.ndarray) -> dict[str, np.ndarray]:
    gx, gy, _ = kernel.grid
    bx, by, _ = kernel.block
    return {"blockIdx.x": block % gx, "blockIdx.y": (block // gx) % gy, "blockIdx.z": block // (gx * gy),
            "threadIdx.x": thread % bx, "threadIdx.y": (thread // bx) % by,
            "threadIdx.z": thread // (bx * by)}
