"""On-chip buffers and DRAM of the functional simulator, with bounds-checked 2-D DMA.

Every SRAM is a numpy array indexed by element (one tile): uop words, inp (batch, block_in),
wgt (block_out, block_in), acc (batch, block_out).  There is no separate out buffer: the out
buffer always equals the low `out_bits` of acc (the RTL writes both together), so STORE
truncates acc.  LOAD ACC_8BIT reads elements of `inp_bits` lanes and writes them, sign-extended,
into acc.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.backend import SimulationError

_INT = {8: np.int8, 16: np.int16, 32: np.int32}


def int_dtype(bits: int) -> Any:
    """The numpy signed integer type of `bits` (8, 16 or 32), as the config's widths allow."""
    return _INT[bits]


@functools.lru_cache(maxsize=256)
def elem_layout(cfg: AcceleratorConfig, memory_type: isa.MemType) -> tuple[Any, tuple[int, ...]]:
    """(numpy dtype, element shape) of one element of `memory_type`."""
    layouts: dict[isa.MemType, tuple[Any, tuple[int, ...]]] = {
        isa.MemType.UOP: (isa.uop_dtype(cfg), ()),
        isa.MemType.INP: (int_dtype(cfg.inp_bits), (cfg.batch, cfg.block_in)),
        isa.MemType.WGT: (int_dtype(cfg.wgt_bits), (cfg.block_out, cfg.block_in)),
        isa.MemType.ACC: (int_dtype(cfg.acc_bits), (cfg.batch, cfg.block_out)),
        isa.MemType.OUT: (int_dtype(cfg.out_bits), (cfg.batch, cfg.block_out)),
        isa.MemType.ACC_8BIT: (int_dtype(cfg.inp_bits), (cfg.batch, cfg.block_out)),
    }
    return layouts[memory_type]


def range_problem(cfg: AcceleratorConfig, memory_type: isa.MemType, what: str, low: int,
                  high: int) -> str | None:
    """Why element indices low..high (inclusive) of `memory_type` leave its SRAM, or None."""
    depth = cfg.depth(memory_type)
    if low < 0 or high >= depth:
        return (f"{what} reaches {memory_type.name} index {high if high >= depth else low}, "
                f"outside the {memory_type.name} buffer of {depth} elements")
    return None


def sram_of(memory_type: isa.MemType) -> isa.MemType:
    """The buffer a LOAD of `memory_type` writes (ACC_8BIT loads into acc)."""
    return isa.MemType.ACC if memory_type == isa.MemType.ACC_8BIT else memory_type


class Scratchpads:
    def __init__(self, cfg: AcceleratorConfig, dram: np.ndarray) -> None:
        self.cfg = cfg
        self.dram = dram
        self.sram: dict[isa.MemType, np.ndarray] = {
            m: np.zeros((cfg.depth(m), *elem_layout(cfg, m)[1]), dtype=elem_layout(cfg, m)[0])
            for m in (isa.MemType.UOP, isa.MemType.INP, isa.MemType.WGT, isa.MemType.ACC)
        }
        # Floating-point copies of inp and wgt for exact BLAS products (see sim.gemm).
        largest = (1 << (cfg.inp_bits - 1)) * (1 << (cfg.wgt_bits - 1)) * cfg.block_in
        mantissa_bits, ftype = (24, np.float32) if largest <= 1 << 24 else (53, np.float64)
        self.exact_terms = max(1, (1 << mantissa_bits) // largest)
        # zeros as the SRAM starts (np.zeros: pages untouched until written, unlike a copy)
        self.mirror = {m: np.zeros(self.sram[m].shape, ftype) for m in (isa.MemType.INP, isa.MemType.WGT)}
        self.on_uop_load: Callable[[], None] = lambda: None

    @property
    def acc(self) -> np.ndarray:
        return self.sram[isa.MemType.ACC]

    def check_range(self, memory_type: isa.MemType, what: str, low: int, high: int) -> None:
        """Raise unless element indices low..high (inclusive) lie inside the SRAM."""
        text = range_problem(self.cfg, memory_type, what, low, high)
        if text:
            raise SimulationError(text)

    def _dram_check(self, insn: isa.MemInsn, memory_type: isa.MemType) -> None:
        """Raise unless the DRAM elements `insn` touches lie inside the DRAM."""
        elem = self.cfg.elem_bytes(memory_type)
        if insn.y_size == 0:  # no row: no DRAM byte is touched, wherever dram_base points
            return
        last = insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size - 1
        if (last + 1) * elem > self.dram.size:
            raise SimulationError(
                f"DRAM access up to byte {(last + 1) * elem - 1} (element {last} of {elem} bytes) "
                f"is outside the {self.dram.size}-byte DRAM"
            )

    def load(self, insn: isa.Load) -> int:
        """Execute a LOAD with zero padding; returns the bytes read from DRAM.

        The lanes are converted to the SRAM's type on the way in: ACC_8BIT sign-extends.
        """
        self.prepare_load(insn)(self)
        return insn.y_size * insn.x_size * self.cfg.elem_bytes(insn.memory_type)

    def prepare_load(self, insn: isa.Load) -> Callable[[Scratchpads], None]:
        """Check a LOAD against this machine's buffers and DRAM; the function that moves its
        data on any machine of the same config and DRAM size (`sim.fsim`'s replay)."""
        m = sram_of(insn.memory_type)
        self.check_range(m, "LOAD", insn.sram_base, insn.sram_base + insn.sram_elems - 1)
        self._dram_check(insn, insn.memory_type)
        return _LoadMove(self.cfg, insn, m)

    def store(self, insn: isa.Store) -> int:
        """Execute a STORE of the out buffer (acc truncated); returns the bytes written."""
        count = insn.y_size * insn.x_size
        if count == 0:
            return 0
        self.prepare_store(insn)(self)
        return count * self.cfg.out_elem_bytes

    def prepare_store(self, insn: isa.Store) -> Callable[[Scratchpads], None]:
        """Check a STORE of at least one element; the function that moves its data (see
        `prepare_load`)."""
        count = insn.y_size * insn.x_size
        self.check_range(isa.MemType.OUT, "STORE", insn.sram_base, insn.sram_base + count - 1)
        self._dram_check(insn, isa.MemType.OUT)
        return _StoreMove(self.cfg, insn)


def dram_window(dram: np.ndarray, insn: isa.MemInsn, elem: int) -> np.ndarray:
    """A (y_size, x_size, elem) uint8 view of the DRAM bytes `insn` touches (checked already)."""
    if insn.y_size == 0:  # no row: no DRAM byte is touched, wherever dram_base points
        return np.zeros((0, insn.x_size, elem), dtype=np.uint8)
    return np.ndarray(
        (insn.y_size, insn.x_size, elem), np.uint8, buffer=dram,
        offset=insn.dram_base * elem, strides=(insn.x_stride * elem, elem, 1),
    )


class _LoadMove:
    """The data movement of one checked LOAD: DRAM rows into an SRAM window with zero padding
    (and into the float mirror of inp and wgt)."""

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Load, m: isa.MemType) -> None:
        self.insn, self.m = insn, m
        self.elem = cfg.elem_bytes(insn.memory_type)
        self.dtype, self.shape = elem_layout(cfg, insn.memory_type)
        self.window = slice(insn.sram_base, insn.sram_base + insn.sram_elems)
        self.padded = insn.sram_elems != insn.y_size * insn.x_size
        self.rows = (slice(insn.y_pad_0, insn.y_pad_0 + insn.y_size),
                     slice(insn.x_pad_0, insn.x_pad_0 + insn.x_size))

    def __call__(self, spads: Scratchpads) -> None:
        insn, m = self.insn, self.m
        # the window as (y_size, x_size, *shape) elements, a view (kept by no one after the call)
        window = dram_window(spads.dram, insn, self.elem).view(self.dtype)
        data = window.reshape(insn.y_size, insn.x_size, *self.shape)
        target = spads.sram[m][self.window]
        if self.padded:
            target[:] = 0
        target.reshape(-1, insn.row_elems, *self.shape)[self.rows] = data  # rows of the window
        if m in spads.mirror:
            spads.mirror[m][self.window] = target
        elif m == isa.MemType.UOP:
            spads.on_uop_load()


class _StoreMove:
    """The data movement of one checked STORE: acc rows, truncated, into DRAM."""

    def __init__(self, cfg: AcceleratorConfig, insn: isa.Store) -> None:
        self.insn, self.elem = insn, cfg.elem_bytes(isa.MemType.OUT)
        self.dtype = elem_layout(cfg, isa.MemType.OUT)[0]
        count = insn.y_size * insn.x_size
        self.window = slice(insn.sram_base, insn.sram_base + count)

    def __call__(self, spads: Scratchpads) -> None:
        out = spads.acc[self.window].astype(self.dtype)
        window = dram_window(spads.dram, self.insn, self.elem)
        window[...] = out.reshape(self.insn.y_size, self.insn.x_size, -1).view(np.uint8)


class Lattice:
    """Element indices `first + sum_k i_k * steps[k]` over `shape` (distinct where written): a strided
    view of an SRAM array instead of a gather and a scatter."""

    def __init__(self, first: int, shape: tuple[int, ...], steps: tuple[int, ...]) -> None:
        self.first, self.shape, self.steps = first, shape, steps
        self._span: tuple[int, int] | None = None

    def span(self) -> tuple[int, int]:
        """[lo, hi) around the elements (the steps are >= 0); computed once (a Lattice is not
        changed, and a step shared by many Programs is compiled once for each)."""
        if self._span is None:
            reach = sum((n - 1) * k for n, k in zip(self.shape, self.steps, strict=True))
            self._span = (self.first, self.first + reach + 1)
        return self._span

    def view(self, sram: np.ndarray) -> np.ndarray:
        """The elements of `sram` (elements on axis 0) at these indices, as a writeable view."""
        strides = tuple(s * sram.strides[0] for s in self.steps) + sram.strides[1:]
        return np.ndarray(self.shape + sram.shape[1:], sram.dtype, buffer=sram,  # as_strided, 4x faster
                          offset=self.first * sram.strides[0], strides=strides)


def lattice(index: np.ndarray, distinct: bool = True) -> Lattice | None:
    """`index` (any shape) as a Lattice when it is one, with steps >= 0 (and every element
    distinct, unless `distinct` is False: a view to read, where a step of 0 repeats an element),
    inside the array it indexes (checked by the caller); else None."""
    if index.size == 0:
        return None
    first = int(index.flat[0])
    shape = index.shape
    steps = tuple(int(index[tuple(1 if a == k else 0 for a in range(index.ndim))]) - first
                  if shape[k] > 1 else 0 for k in range(index.ndim))
    if not np.array_equal(_grid(first, shape, steps), index):
        return None
    return _checked(first, shape, steps, distinct, index)


def loop_lattice(base: np.ndarray, iter_out: int, iter_in: int, out: int, inner: int,
                 distinct: bool = True) -> Lattice | None:
    """`lattice` of the index `base[k] + i*out + j*inner` over (i, j, k) < (iter_out, iter_in,
    len(base)), a GEMM or ALU loop's (`sim.gemm.loop_indices` reshaped to 3-D), found from `base`
    alone: the loops add a lattice's steps, so the index is one exactly when `base` is."""
    shape = (iter_out, iter_in, base.size)
    if not iter_out or not iter_in or not base.size:
        return None
    b = base.tolist()
    first = b[0]
    step = b[1] - first if len(b) > 1 else 0
    steps = (out if iter_out > 1 else 0, inner if iter_in > 1 else 0, step)
    if any(b[k] != first + k * step for k in range(2, len(b))):
        return None
    return _checked(first, shape, steps, distinct)


def _checked(first: int, shape: tuple[int, ...], steps: tuple[int, ...], distinct: bool,
             index: np.ndarray | None = None) -> Lattice | None:
    """Lattice(first, shape, steps) where its steps are >= 0 and, if `distinct`, its elements
    (`index`, or its grid) are distinct; else None."""
    if any(s < 0 or (distinct and s == 0 and n > 1) for s, n in zip(steps, shape, strict=True)):
        return None
    if distinct and not _mixed_radix(shape, steps):
        grid = _grid(first, shape, steps) if index is None else index
        if not distinct_elements(grid):
            return None
    return Lattice(first, shape, steps)


def distinct_elements(index: np.ndarray) -> bool:
    """Whether no element of `index` repeats (a sort: `np.unique` costs more on small arrays,
    and its first call imports `numpy.ma`, a twentieth of a second)."""
    flat = np.sort(index, axis=None)
    return not bool((flat[1:] == flat[:-1]).any())


def _grid(first: int, shape: tuple[int, ...], steps: tuple[int, ...]) -> np.ndarray:
    """The indices of Lattice(first, shape, steps)."""
    grid = np.asarray(first, dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, steps, strict=True)):
        grid = grid + np.arange(n).reshape((-1,) + (1,) * (len(shape) - 1 - k)) * s
    return grid


def _mixed_radix(shape: tuple[int, ...], steps: tuple[int, ...]) -> bool:
    """Whether the lattice's elements are distinct by the digits argument (no sort): taken in
    order of step, each step exceeds the reach `sum (n_j - 1) * step_j` of the smaller ones.
    False means "not shown" (e.g. steps 2 and 3 over 3 x 2 are distinct, but not this way)."""
    reach = 0
    for step, n in sorted((s, n) for s, n in zip(steps, shape, strict=True) if n > 1):
        if step <= reach:
            return False
        reach += (n - 1) * step
    return True
