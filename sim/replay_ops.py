"""The ops of `sim.replay`: one recorded fsim step (or a fused run of them) with everything that
depends only on the Program decided, bound once to a replay's SRAM, then called per run with
the DRAM.  Each op does what its steps do, bit for bit; a step with no op of its own runs as
recorded (`StepOp`)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.product import ProductGroup, ProductKernel, Scratch
from sim.scratchpads import Scratchpads, _StoreMove, distinct_elements, elem_layout, sram_of

ACC = isa.MemType.ACC
Write = tuple[isa.MemType | None, int, int]
_RANK = {isa.MemType.INP: 0, isa.MemType.WGT: 1, isa.MemType.ACC: 2}


class Op:
    """What the pass in `sim.replay` asks of an op; the defaults are a step with no ACC access."""

    is_load = False
    buffer_rank = 0

    def merge(self, other: Op) -> bool:
        """Absorb `other`, the op right after this one, where the two fuse."""
        return False

    def finish(self) -> list[Op]:
        """This op as the ops to run, once merging is over."""
        return [self]

    def writes(self) -> list[Write]:
        """(buffer, lo, hi): element ranges of SRAM this op may write (None: any)."""
        return []

    def acc_touched(self) -> np.ndarray | None:
        """The acc elements this op reads or writes (None: any)."""
        return np.zeros(0, np.int64)

    def acc_written(self) -> np.ndarray | None:
        """The acc elements this op writes (None: any)."""
        return np.zeros(0, np.int64)

    @functools.cached_property
    def acc_span(self) -> tuple[int, int] | None:
        """[lo, hi) around the acc elements this op reads or writes (None: any)."""
        touched = self.acc_touched()
        if touched is None:
            return None
        return (int(touched.min()), int(touched.max()) + 1) if touched.size else (0, 0)

    @functools.cached_property
    def acc_range(self) -> tuple[int, int] | None:
        """[lo, hi) around the acc elements this op writes (None: any)."""
        ranges = [(lo, hi) for m, lo, hi in self.writes() if m in (ACC, None)]
        if any(m is None for m, _, _ in self.writes()):
            return None
        return (min(lo for lo, _ in ranges), max(hi for _, hi in ranges)) if ranges else (0, 0)

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        """The callable `f(dram)` that runs this op on `spads` (`memo`: what ops bound to the same
        `spads` share)."""
        raise NotImplementedError


class StepOp(Op):
    """A step run as recorded, on the replay's Scratchpads; unless told, it may write any SRAM
    and touch any accumulator."""

    def __init__(self, step: Any, writes: list[Write] | None = None,
                 touched: np.ndarray | None = None) -> None:
        self.step, self.written, self.touched = step, writes, touched

    def writes(self) -> list[Write]:
        return [(None, 0, 0)] if self.written is None else self.written

    def acc_touched(self) -> np.ndarray | None:
        return self.touched

    def acc_written(self) -> np.ndarray | None:
        return None if self.written is None else np.zeros(0, np.int64)

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        return _CallStep(self.step, spads)


class _CallStep:
    __slots__ = ("spads", "step")

    def __init__(self, step: Any, spads: Scratchpads) -> None:
        self.step, self.spads = step, spads

    def __call__(self, dram: np.ndarray) -> None:
        self.step(self.spads)


class _MoveRun(Op):
    """`count` LOADs or STOREs of `insn`'s geometry: SRAM windows back to back from
    `insn.sram_base`, DRAM windows `delta` elements apart from `insn.dram_base`."""

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Load | isa.Store, sram_elems: int) -> None:
        self.cfg, self.insn, self.count, self.delta = cfg, insn, 1, 0
        self.sram_elems = sram_elems
        self.geometry = (insn.memory_type, insn.y_size, insn.x_size, insn.x_stride, insn.y_pad_0,
                         insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)

    def merge(self, other: Op) -> bool:
        if type(other) is not type(self) or self.insn.y_size == 0:
            return False
        a, b = self.insn, other.insn  # type: ignore[attr-defined]
        if self.geometry != other.geometry or other.count != 1 or \
                b.sram_base != a.sram_base + self.count * self.sram_elems:  # type: ignore[attr-defined]
            return False
        delta = b.dram_base - (a.dram_base + (self.count - 1) * self.delta)
        if self.count > 1 and delta != self.delta:
            return False
        self.count, self.delta = self.count + 1, delta
        return True

    def dram_layout(self) -> tuple[Any, tuple[int, ...], int, tuple[int, ...]]:
        """(dtype, shape, offset, strides) of the DRAM windows as (count, y_size, x_size, *tile)
        elements: `np.ndarray(shape, dtype, dram, offset, strides)` views them."""
        insn, elem = self.insn, self.cfg.elem_bytes(self.insn.memory_type)
        dtype, tile = elem_layout(self.cfg, insn.memory_type)
        inner: list[int] = []
        stride = np.dtype(dtype).itemsize
        for n in reversed(tile):  # a tile is C-contiguous
            inner.insert(0, stride)
            stride *= n
        return (dtype, (self.count, insn.y_size, insn.x_size, *tile), insn.dram_base * elem,
                (self.delta * elem, insn.x_stride * elem, elem, *inner))


    def dram_elements(self) -> np.ndarray:
        insn = self.insn
        i = np.arange(self.count)[:, None, None] * self.delta
        r = np.arange(insn.y_size)[None, :, None] * insn.x_stride
        return (insn.dram_base + i + r + np.arange(insn.x_size)[None, None, :]).reshape(-1)


class LoadOp(_MoveRun):
    """LOADs (see `_MoveRun`) with zero padding, into acc or the float mirror of inp and wgt."""

    is_load = True

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Load) -> None:
        super().__init__(cfg, insn, insn.sram_elems)
        self.m = sram_of(insn.memory_type)
        self.buffer_rank = _RANK.get(self.m, 3)

    def writes(self) -> list[Write]:
        lo = self.insn.sram_base
        return [(self.m, lo, lo + self.count * self.sram_elems)]

    @property
    def acc_range(self) -> tuple[int, int] | None:  # (`writes` in one range: no list to build)
        lo = self.insn.sram_base
        return (lo, lo + self.count * self.sram_elems) if self.m == ACC else (0, 0)

    def acc_touched(self) -> np.ndarray | None:
        if self.m != ACC:
            return np.zeros(0, np.int64)
        lo = self.insn.sram_base
        return np.arange(lo, lo + self.count * self.sram_elems)

    def acc_written(self) -> np.ndarray | None:
        return self.acc_touched()

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        insn = self.insn
        buffer = spads.mirror.get(self.m, spads.sram[self.m])
        lo = insn.sram_base
        window = buffer[lo : lo + self.count * self.sram_elems]
        tiles = window.reshape(self.count, -1, insn.row_elems, *window.shape[1:])
        inner = tiles[:, insn.y_pad_0 : insn.y_pad_0 + insn.y_size,
                      insn.x_pad_0 : insn.x_pad_0 + insn.x_size]
        padded = insn.sram_elems != insn.y_size * insn.x_size
        return _Load(self, window if padded else None, inner if insn.y_size else None)


class _Load:
    __slots__ = ("dtype", "inner", "offset", "shape", "strides", "window")

    def __init__(self, op: LoadOp, window: np.ndarray | None, inner: np.ndarray | None) -> None:
        self.window, self.inner = window, inner
        self.dtype, self.shape, self.offset, self.strides = op.dram_layout()

    def __call__(self, dram: np.ndarray) -> None:
        if self.window is not None:
            self.window.fill(0)
        if self.inner is not None:  # int8 lanes to float (the mirror) or sign-extended to acc
            source = np.ndarray(self.shape, self.dtype, dram, self.offset, self.strides)
            np.copyto(self.inner, source, casting="unsafe")


class StoreOp(_MoveRun):
    """STOREs (see `_MoveRun`) of acc truncated to out; fused only where the DRAM windows are
    disjoint (else each runs as recorded)."""

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Store) -> None:
        super().__init__(cfg, insn, insn.y_size * insn.x_size)

    def finish(self) -> list[Op]:
        insn = self.insn
        span = (insn.y_size - 1) * insn.x_stride + insn.x_size  # DRAM elements one store spans
        if insn.x_stride >= insn.x_size and (self.count == 1 or abs(self.delta) >= span):
            return [self]  # rows and stores disjoint
        elements = self.dram_elements()
        if distinct_elements(elements):
            return [self]
        return [StepOp(_StoreMove(self.cfg, insn), writes=[], touched=np.arange(
                    insn.sram_base, insn.sram_base + self.sram_elems))
                for insn in (_nth(self.insn, k, self.sram_elems, self.delta) for k in range(self.count))]

    def acc_touched(self) -> np.ndarray | None:
        lo = self.insn.sram_base
        return np.arange(lo, lo + self.count * self.sram_elems)

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        lo = self.insn.sram_base
        source = spads.acc[lo : lo + self.count * self.sram_elems]
        return _Store(self, source.reshape(self.count, self.insn.y_size, self.insn.x_size,
                                           *source.shape[1:]))


class _Store:
    __slots__ = ("dtype", "offset", "shape", "source", "strides")

    def __init__(self, op: StoreOp, source: np.ndarray) -> None:
        self.source = source
        self.dtype, self.shape, self.offset, self.strides = op.dram_layout()

    def __call__(self, dram: np.ndarray) -> None:  # truncates acc to out's bits, as astype does
        target = np.ndarray(self.shape, self.dtype, dram, self.offset, self.strides)
        np.copyto(target, self.source, casting="unsafe")


def _nth(insn: isa.Load | isa.Store, k: int, sram_elems: int, delta: int) -> Any:
    return dataclasses.replace(insn, sram_base=insn.sram_base + k * sram_elems,
                               dram_base=insn.dram_base + k * delta)


class ResetOp(Op):
    """A GEMM reset: the accumulators `dst` (a lattice view where they form one) set to 0."""

    def __init__(self, dst: np.ndarray, lat: Any) -> None:
        self.dst, self.lattice = dst, lat
        self.span = lat.span() if lat is not None else \
            (int(dst.min()), int(dst.max()) + 1) if dst.size else (0, 0)

    def writes(self) -> list[Write]:
        return [(ACC, *self.span)] if self.span[1] > self.span[0] else []

    @functools.cached_property
    def acc_span(self) -> tuple[int, int] | None:
        return self.span

    def acc_touched(self) -> np.ndarray | None:
        return self.dst

    def acc_written(self) -> np.ndarray | None:
        return self.dst

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        if self.lattice is not None:
            return _Fill(self.lattice.view(spads.acc))
        return _Zero(spads.acc, self.dst)


class _Fill:
    __slots__ = ("view",)

    def __init__(self, view: np.ndarray) -> None:
        self.view = view

    def __call__(self, dram: np.ndarray) -> None:
        self.view.fill(0)


class _Zero:
    __slots__ = ("acc", "index")

    def __init__(self, acc: np.ndarray, index: np.ndarray) -> None:
        self.acc, self.index = acc, index

    def __call__(self, dram: np.ndarray) -> None:
        self.acc[self.index] = 0


class ProductOp(Op):
    """A GEMM of matrix products (`sim.gemm._Product`): products of one shape stacked into one
    batched product (`sim.product.ProductKernel`); with `assign`, acc gets the products instead of
    adding them (a reset before it was dropped)."""

    def __init__(self, cfg: AcceleratorConfig, groups: list[ProductGroup]) -> None:
        self.cfg, self.groups, self.assign = cfg, groups, False

    def written_size(self) -> int:
        return sum(g.written.size for g in self.groups)

    def writes(self) -> list[Write]:
        return [(ACC, *g.span) for g in self.groups if g.written.size]

    @functools.cached_property
    def acc_span(self) -> tuple[int, int] | None:
        return self.acc_range

    def acc_touched(self) -> np.ndarray | None:
        return np.concatenate([g.written.reshape(-1) for g in self.groups] or [np.zeros(0, np.int64)])

    def acc_written(self) -> np.ndarray | None:
        return self.acc_touched()

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        key = (id(self.groups), self.assign)  # a GEMM run often: one kernel (buffers used in a call)
        if key not in memo:
            scratch = memo.setdefault("scratch", Scratch())
            kernels = [ProductKernel(self.cfg, spads, g, self.assign, scratch) for g in self.groups]
            memo[key] = kernels[0] if len(kernels) == 1 else _Each(kernels)  # none: an empty loop
        return memo[key]


class _Each:
    __slots__ = ("calls",)

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def __call__(self, dram: np.ndarray) -> None:
        for call in self.calls:
            call(dram)
