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
        self.mirror = {m: self.sram[m].astype(ftype) for m in (isa.MemType.INP, isa.MemType.WGT)}
        self.on_uop_load: Callable[[], None] = lambda: None

    @property
    def acc(self) -> np.ndarray:
        return self.sram[isa.MemType.ACC]

    def check_range(self, memory_type: isa.MemType, what: str, low: int, high: int) -> None:
        """Raise unless element indices low..high (inclusive) lie inside the SRAM."""
        text = range_problem(self.cfg, memory_type, what, low, high)
        if text:
            raise SimulationError(text)

    def _dram_window(self, insn: isa.MemInsn, memory_type: isa.MemType) -> np.ndarray:
        """A (y_size, x_size, elem_bytes) view of the DRAM bytes `insn` touches, bounds-checked."""
        elem = self.cfg.elem_bytes(memory_type)
        if insn.y_size == 0:  # no row: no DRAM byte is touched, wherever dram_base points
            return np.zeros((0, insn.x_size, elem), dtype=np.uint8)
        last = insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size - 1
        if (last + 1) * elem > self.dram.size:
            raise SimulationError(
                f"DRAM access up to byte {(last + 1) * elem - 1} (element {last} of {elem} bytes) "
                f"is outside the {self.dram.size}-byte DRAM"
            )
        return np.ndarray(
            (insn.y_size, insn.x_size, elem), np.uint8, buffer=self.dram,
            offset=insn.dram_base * elem, strides=(insn.x_stride * elem, elem, 1),
        )

    def load(self, insn: isa.Load) -> int:
        """Execute a LOAD with zero padding; returns the bytes read from DRAM.

        The lanes are converted to the SRAM's type on the way in: ACC_8BIT sign-extends.
        """
        m = sram_of(insn.memory_type)
        dtype, shape = elem_layout(self.cfg, insn.memory_type)
        self.check_range(m, "LOAD", insn.sram_base, insn.sram_base + insn.sram_elems - 1)
        raw = np.ascontiguousarray(self._dram_window(insn, insn.memory_type))
        data: np.ndarray = raw.view(dtype).reshape(insn.y_size, insn.x_size, *shape)
        target = self.sram[m][insn.sram_base : insn.sram_base + insn.sram_elems]
        tile = target.reshape(-1, insn.row_elems, *shape)  # a view: rows of the SRAM window
        if insn.sram_elems != insn.y_size * insn.x_size:
            target[:] = 0
        tile[insn.y_pad_0 : insn.y_pad_0 + insn.y_size, insn.x_pad_0 : insn.x_pad_0 + insn.x_size] = (
            data
        )
        if m in self.mirror:
            window = slice(insn.sram_base, insn.sram_base + insn.sram_elems)
            self.mirror[m][window] = target
        elif m == isa.MemType.UOP:
            self.on_uop_load()
        return insn.y_size * insn.x_size * self.cfg.elem_bytes(insn.memory_type)

    def store(self, insn: isa.Store) -> int:
        """Execute a STORE of the out buffer (acc truncated); returns the bytes written."""
        count = insn.y_size * insn.x_size
        if count == 0:
            return 0
        self.check_range(isa.MemType.OUT, "STORE", insn.sram_base, insn.sram_base + count - 1)
        window = self._dram_window(insn, isa.MemType.OUT)
        dtype, _ = elem_layout(self.cfg, isa.MemType.OUT)
        out: np.ndarray = self.acc[insn.sram_base : insn.sram_base + count].astype(dtype)
        window[...] = out.reshape(insn.y_size, insn.x_size, -1).view(np.uint8)
        return count * self.cfg.out_elem_bytes
