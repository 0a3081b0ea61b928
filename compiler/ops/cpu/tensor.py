"""Data movement and conversion on the host: transpose, gather and cast, exactly.

- transpose(data[S]) -> data permuted by `perm` (any rank, ONNX Transpose / np.transpose);
- gather(data[D], indices[I]) -> data[D[:axis] + I + D[axis+1:]], indices int32 or int64,
  negative ones counting from the end (ONNX Gather / np.take).  An index outside [-D[axis],
  D[axis]) is clamped to the nearest row, so the kernel never reads out of bounds; the graph
  interpreter (and onnxruntime) reject such an index instead;
- cast(data[S]) -> data as dtype `to` (ONNX Cast, numpy's astype): integers wrap, integer ->
  float rounds to nearest even, float -> integer truncates toward zero, anything -> bool is
  `x != 0` (NaN -> True).  A float outside the integer's range, or NaN, saturates (NaN -> 0),
  where numpy's astype gives whatever the C conversion gives (e.g. INT_MIN): results agree
  exactly for every in-range value.

Host kernels take numeric tensors only, so a bool tensor is stored as uint8 (0 or 1, numpy's
own bool bytes): the kernel these operators build (`BoolViews`) takes and returns bool arrays
as views of uint8 ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.codegen.cpu import HostKernel
from compiler.ops.cpu.base import NUMERIC, HostOp, check_dtype, check_int, check_shape
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder

ANY = (*NUMERIC, "bool")
INDICES = ("int32", "int64")
# transposes of at least this many elements are tiled (8 x 8), below they fit the caches anyway
TILE_ELEMS, TILE = 1 << 18, 8


def storage(dtype: str) -> str:
    """The dtype a kernel stores `dtype` in: bool as uint8."""
    return "uint8" if dtype == "bool" else dtype


class BoolViews(HostKernel):
    """A kernel whose bool arguments are stored as uint8: bool arrays go in as uint8 views and
    bool outputs come back as bool views (0 and 1 are numpy's bool bytes)."""

    def __init__(self, inner: HostKernel, bools: Sequence[bool]) -> None:
        super().__init__(inner.func, inner.jit, inner.llvm_ir)
        self.bools = tuple(bools)  # per argument, inputs then outputs

    def __call__(self, *inputs: np.ndarray, out: np.ndarray | Sequence[np.ndarray] | None = None
                 ) -> np.ndarray | tuple[np.ndarray, ...]:
        result = super().__call__(*inputs, out=out)
        if out is not None:
            return result
        outs = [result] if isinstance(result, np.ndarray) else list(result)
        flags = self.bools[len(self.inputs) :]
        outs = [o.view(np.bool_) if b else o for o, b in zip(outs, flags, strict=True)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, *arrays: np.ndarray) -> None:
        views = [a.view(np.uint8) if b and isinstance(a, np.ndarray) and a.dtype == np.bool_ else a
                 for a, b in zip(arrays, self.bools, strict=False)]
        super().run(*views, *arrays[len(views) :])


def with_bools(kernel: HostKernel, bools: Sequence[bool]) -> HostKernel:
    """`kernel`, taking and returning bool arrays where `bools` says so."""
    return BoolViews(kernel, bools) if any(bools) else kernel


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(np.dtype(dtype))
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


# -- Transpose -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transpose(HostOp):
    """data[S] -> data permuted: out.shape[p] = S[perm[p]] (np.transpose(data, perm)).

    The last output axis is vectorised when it is also the input's last axis (each row a
    contiguous copy); otherwise a large transpose is tiled 8 x 8 over the two axes that are
    last in the input and in the output, so both the reads and the writes of a tile stay in a
    few cache lines."""

    shape: tuple[int, ...]
    perm: tuple[int, ...]
    dtype: str = "float32"
    op: ClassVar[str] = "transpose"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        perm = tuple(self.perm)
        if sorted(perm) != list(range(len(self.shape))) or any(isinstance(p, bool) for p in perm):
            raise ValueError(f"{self.op}: perm {self.perm} is not a permutation of the "
                             f"{len(self.shape)} axes of {self.shape}")
        object.__setattr__(self, "perm", tuple(int(p) for p in perm))
        check_dtype(self.op, "data", self.dtype, ANY)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[p] for p in self.perm)

    def tensors(self) -> dict[str, Tensor]:
        data = placeholder(self.shape, storage(self.dtype), "data")
        where = [self.perm.index(d) for d in range(len(self.shape))]  # output axis of input axis d
        out = compute(self.out_shape, lambda *i: data[tuple(i[w] for w in where)], "out")
        return {"data": data, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        rank, out_shape = len(self.shape), self.out_shape
        last = f"i{rank - 1}"
        q = self.perm.index(rank - 1)  # the output axis that is the input's last
        if q == rank - 1:
            vectorize_loop(s, "out", last, out_shape[-1])
        elif math.prod(self.shape) >= TILE_ELEMS and out_shape[q] % TILE == 0 and out_shape[-1] % TILE == 0:
            s.split("out", f"i{q}", TILE)
            s.split("out", last, TILE)
            inner = (f"i{q}.i", f"{last}.i")
            s.reorder("out", *(a for a in s.stage("out").leaves if a not in inner), *inner)
            s.vectorize("out", f"{last}.i")
        return s

    def build(self, opt_level: int = 3) -> HostKernel:
        return with_bools(super().build(opt_level), [self.dtype == "bool"] * 2)

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        return [_random(np.random.default_rng(seed), self.shape, self.dtype)]

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return np.ascontiguousarray(np.transpose(data, self.perm))


# -- Gather ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gather(HostOp):
    """data[D] gathered along `axis` by indices[I] (np.take with negative indices from the end;
    out-of-range ones clamped).

    Each index is first normalised into a position (int32, a temporary of I's shape); the copy
    then vectorises over the trailing data axes (a contiguous run per index when axis is not the
    last)."""

    shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    axis: int = 0
    dtype: str = "float32"
    index_dtype: str = "int64"
    op: ClassVar[str] = "gather"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        object.__setattr__(self, "indices_shape", check_shape(self.op, self.indices_shape))
        object.__setattr__(self, "axis", check_int(self.op, "axis", self.axis, 0, len(self.shape) - 1))
        check_dtype(self.op, "data", self.dtype, ANY)
        check_dtype(self.op, "indices", self.index_dtype, INDICES)
        if self.shape[self.axis] > np.iinfo(np.int32).max:
            raise ValueError(f"{self.op}: axis {self.axis} of {self.shape} is too long for int32 positions")

    @property
    def out_shape(self) -> tuple[int, ...]:
        a = self.axis
        return self.shape[:a] + self.indices_shape + self.shape[a + 1 :]

    def tensors(self) -> dict[str, Tensor]:
        a, q, dim = self.axis, len(self.indices_shape), self.shape[self.axis]
        data = placeholder(self.shape, storage(self.dtype), "data")
        indices = placeholder(self.indices_shape, self.index_dtype, "indices")

        def position(*j: E.Expr) -> E.Expr:
            idx = indices[j]
            wrapped = idx + E.if_then_else(E.lt(idx, 0), E.const(dim, self.index_dtype),
                                           E.const(0, self.index_dtype))
            return E.cast("int32", E.minimum(E.maximum(wrapped, 0), dim - 1))

        pos = compute(self.indices_shape, position, "pos")
        out = compute(self.out_shape, lambda *i: data[(*i[:a], pos[i[a : a + q]], *i[a + q :])], "out")
        return {"data": data, "indices": indices, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        if self.axis < len(self.shape) - 1:  # the innermost loop copies a contiguous run
            vectorize_loop(s, "out", s.stage("out").leaves[-1], self.shape[-1])
        return s

    def build(self, opt_level: int = 3) -> HostKernel:
        return with_bools(super().build(opt_level), [self.dtype == "bool", False, self.dtype == "bool"])

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        dim = self.shape[self.axis]
        indices = rng.integers(-dim, dim, self.indices_shape).astype(self.index_dtype)
        return [_random(rng, self.shape, self.dtype), indices]

    def reference(self, data: np.ndarray, indices: np.ndarray) -> np.ndarray:  # type: ignore[override]
        dim = self.shape[self.axis]
        pos = np.clip(np.where(indices < 0, indices.astype(np.int64) + dim, indices), 0, dim - 1)
        return np.take(data, pos, axis=self.axis)


# -- Cast ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cast(HostOp):
    """data[S] of `dtype` -> data[S] of `to`, as numpy's astype for every in-range value."""

    shape: tuple[int, ...]
    dtype: str
    to: str
    op: ClassVar[str] = "cast"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        check_dtype(self.op, "input", self.dtype, ANY)
        check_dtype(self.op, "output", self.to, ANY)

    def tensors(self) -> dict[str, Tensor]:
        data = placeholder(self.shape, storage(self.dtype), "data")
        out_dtype = storage(self.to)

        def convert(*i: E.Expr) -> E.Expr:
            x = data[i]
            if self.dtype == "bool" or self.to == "bool":
                nonzero = E.binary("!=", x, E.const(0, x.dtype))
                return E.if_then_else(nonzero, E.const(1, out_dtype), E.const(0, out_dtype))
            return E.cast(out_dtype, x)

        return {"data": data, "out": compute(self.shape, convert, "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        vectorize_loop(s, "out", s.stage("out").leaves[-1], self.shape[-1])
        return s

    def build(self, opt_level: int = 3) -> HostKernel:
        return with_bools(super().build(opt_level), [self.dtype == "bool", self.to == "bool"])

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        """Seeded inputs that convert without overflow: floats inside the target's range (or
        standard normal for float and bool targets); integers over their full range."""
        rng = np.random.default_rng(seed)
        if self.dtype != "float32" or self.to in ("float32", "bool"):
            return [_random(rng, self.shape, self.dtype)]
        info = np.iinfo(np.dtype(self.to))
        low, high = max(float(info.min), -1e6), min(float(info.max), 1e6)
        return [rng.uniform(low, high, self.shape).astype(np.float32)]

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return data.astype(self.to)
