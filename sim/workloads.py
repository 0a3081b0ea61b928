"""Hand-written Programs with their numpy references: the blocked GEMM of VTA's test_lib.

Data use the packed layouts of the accelerator: A is (M/batch, K/block_in, batch, block_in),
B is (N/block_out, K/block_in, block_out, block_in), C is (M/batch, N/block_out, batch, block_out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.errors import InputError
from hw.program import Program, ProgramBuilder, UopSpan
from sim.scratchpads import int_dtype


@dataclass(frozen=True)
class GemmTiling:
    """Matrix sizes and tile sizes, all in blocks (tiles of the GEMM core)."""

    m_blocks: int
    k_blocks: int
    n_blocks: int
    m_tile: int
    k_tile: int
    n_tile: int
    virtual_threads: int = 1

    @property
    def macs_per_block(self) -> int:
        return self.m_blocks * self.k_blocks * self.n_blocks

    def check(self, cfg: AcceleratorConfig) -> None:
        for name in ("m", "k", "n"):
            blocks, tile = getattr(self, f"{name}_blocks"), getattr(self, f"{name}_tile")
            if blocks % tile:
                raise InputError(f"{name}_blocks={blocks} is not a multiple of {name}_tile={tile}")
        vt = self.virtual_threads
        need = {"inp": vt * self.m_tile * self.k_tile, "wgt": vt * self.n_tile * self.k_tile,
                "acc": self.m_tile * self.n_tile}
        for kind, elems in need.items():
            if elems > getattr(cfg, f"{kind}_depth"):
                raise InputError(f"tiles need {elems} {kind} elements, the buffer holds "
                                 f"{getattr(cfg, f'{kind}_depth')}")


@dataclass(frozen=True)
class Workload:
    program: Program
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    macs: int


def gemm_reference(cfg: AcceleratorConfig, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C (packed) = low out_bits of (A @ B^T) wrapped to acc_bits."""
    c = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int64), b.astype(np.int64))
    return c.astype(int_dtype(cfg.acc_bits)).astype(int_dtype(cfg.out_bits))


def random_operands(cfg: AcceleratorConfig, t: GemmTiling, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (t.m_blocks, t.k_blocks, cfg.batch, cfg.block_in))
    b = rng.integers(-128, 128, (t.n_blocks, t.k_blocks, cfg.block_out, cfg.block_in))
    return {"A": a.astype(int_dtype(cfg.inp_bits)), "B": b.astype(int_dtype(cfg.wgt_bits))}


def blocked_gemm(cfg: AcceleratorConfig, t: GemmTiling, seed: int = 0) -> Workload:
    """C = A @ B^T tile by tile, inp/wgt tiles double-buffered when virtual_threads == 2."""
    t.check(cfg)
    inputs = random_operands(cfg, t, seed)
    expected = {"C": gemm_reference(cfg, inputs["A"], inputs["B"])}
    program = _BlockedGemmWriter(cfg, t).build()
    macs = t.macs_per_block * cfg.macs_per_cycle
    return Workload(program, inputs, expected, macs)


class _BlockedGemmWriter:
    """Loop order as VTA recommends: reduction outermost, so one accumulator is written again
    only every m_tile * n_tile micro-ops (no read-after-write hazard in the GEMM pipeline).

    With two virtual threads, inp/wgt tiles alternate between SRAM halves (the loads of tile
    q + 1 overlap the GEMMs of tile q) and, when it fits, so does the accumulator of each output
    block (the store of block b overlaps the GEMMs of block b + 1).
    """

    def __init__(self, cfg: AcceleratorConfig, t: GemmTiling) -> None:
        self.cfg, self.t = cfg, t
        self.b = ProgramBuilder(cfg)
        self.a_region = self.b.region("A", (t.m_blocks, t.k_blocks, cfg.batch, cfg.block_in),
                                      np.dtype(int_dtype(cfg.inp_bits)), "input")
        self.b_region = self.b.region("B", (t.n_blocks, t.k_blocks, cfg.block_out, cfg.block_in),
                                      np.dtype(int_dtype(cfg.wgt_bits)), "input")
        self.c_region = self.b.region("C", (t.m_blocks, t.n_blocks, cfg.batch, cfg.block_out),
                                      np.dtype(int_dtype(cfg.out_bits)), "output")
        self.tiles = (t.m_blocks // t.m_tile) * (t.n_blocks // t.n_tile) * (t.k_blocks // t.k_tile)
        fits = 2 * t.m_tile * t.n_tile <= cfg.acc_depth
        self.acc_halves = 2 if t.virtual_threads == 2 and fits else 1

    def _acc_base(self, block: int) -> int:
        return (block % self.acc_halves) * self.t.m_tile * self.t.n_tile

    def _spans(self) -> tuple[list[UopSpan], dict[tuple[int, int], UopSpan]]:
        """Reset kernels per acc half; GEMM kernels per (inp/wgt half, acc half)."""
        t, b = self.t, self.b
        resets = [b.uops([isa.Uop(dst=self._acc_base(a) + n) for n in range(t.n_tile)])
                  for a in range(self.acc_halves)]
        gemms = {}
        for half in range(t.virtual_threads):
            inp0, wgt0 = half * t.m_tile * t.k_tile, half * t.n_tile * t.k_tile
            for a in range(self.acc_halves):
                gemms[half, a] = b.uops([
                    isa.Uop(dst=self._acc_base(a) + n, src=inp0, wgt=wgt0 + n * t.k_tile)
                    for n in range(t.n_tile)
                ])
        return resets, gemms

    def build(self) -> Program:
        t, b = self.t, self.b
        resets, gemms = self._spans()
        b.load_uops(UopSpan(0, b.uop_count))  # the whole table, once, at SRAM index 0
        blocks = [(i, j) for i in range(t.m_blocks // t.m_tile) for j in range(t.n_blocks // t.n_tile)]
        q = 0  # global tile counter: selects the SRAM half and the WAR tokens
        for index, (i, j) in enumerate(blocks):
            acc_half = index % self.acc_halves
            reset = resets[acc_half]
            b.gemm(reset=True, uop_bgn=reset.begin, uop_end=reset.begin + reset.count,
                   iter_out=t.m_tile, dst_factor_out=t.n_tile,
                   pop_next=index >= self.acc_halves)
            k_tiles = t.k_blocks // t.k_tile
            for kk in range(k_tiles):
                self._load_tile(i, j, kk, q)
                span = gemms[q % t.virtual_threads, acc_half]
                self._gemm_tile(span, q, last=kk == k_tiles - 1)
                q += 1
            b.store(self.c_region, self._acc_base(index), y_size=t.m_tile, x_size=t.n_tile,
                    x_stride=t.n_blocks, elem_offset=i * t.m_tile * t.n_blocks + j * t.n_tile,
                    pop_prev=True, push_prev=True)
        for _ in range(min(self.acc_halves, len(blocks)) - 1):  # drain the stores' tokens
            b.nop(isa.Module.COMPUTE, pop_next=True)
        b.finish(pop_next=True)
        return b.build()

    def _load_tile(self, i: int, j: int, kk: int, q: int) -> None:
        t, b = self.t, self.b
        half = q % t.virtual_threads
        b.load(isa.MemType.WGT, self.b_region, half * t.n_tile * t.k_tile,
               y_size=t.n_tile, x_size=t.k_tile, x_stride=t.k_blocks,
               elem_offset=j * t.n_tile * t.k_blocks + kk * t.k_tile,
               pop_next=q >= t.virtual_threads)
        b.load(isa.MemType.INP, self.a_region, half * t.m_tile * t.k_tile,
               y_size=t.m_tile, x_size=t.k_tile, x_stride=t.k_blocks,
               elem_offset=i * t.m_tile * t.k_blocks + kk * t.k_tile, push_next=True)

    def _gemm_tile(self, span: UopSpan, q: int, *, last: bool) -> None:
        t = self.t
        self.b.gemm(uop_bgn=span.begin, uop_end=span.begin + span.count,
                    iter_out=t.k_tile, src_factor_out=1, wgt_factor_out=1,
                    iter_in=t.m_tile, dst_factor_in=t.n_tile, src_factor_in=t.k_tile,
                    pop_prev=True, push_prev=q + t.virtual_threads < self.tiles,
                    push_next=last)


def resident_gemm(cfg: AcceleratorConfig, *, m_tile: int, k_tile: int, n_tile: int,
                  repeats: int, seed: int = 0) -> Workload:
    """Operands loaded once, then `repeats` GEMMs over them: GEMM core throughput in isolation.

    The result is `repeats` times the product (accumulated without reset) of one tile.
    """
    t = GemmTiling(m_tile, k_tile, n_tile, m_tile, k_tile, n_tile, 1)
    t.check(cfg)
    w = _BlockedGemmWriter(cfg, t)
    b = w.b
    (reset,), gemms = w._spans()
    b.load_uops(UopSpan(0, b.uop_count))
    w._load_tile(0, 0, 0, 0)
    span = gemms[0, 0]
    b.gemm(reset=True, uop_bgn=reset.begin, uop_end=reset.begin + reset.count,
           iter_out=m_tile, dst_factor_out=n_tile)
    for r in range(repeats):
        b.gemm(uop_bgn=span.begin, uop_end=span.begin + span.count, iter_out=k_tile,
               src_factor_out=1, wgt_factor_out=1, iter_in=m_tile, dst_factor_in=n_tile,
               src_factor_in=k_tile, pop_prev=r == 0, push_next=r == repeats - 1)
    b.store(w.c_region, 0, y_size=m_tile, x_size=n_tile, pop_prev=True, push_prev=True)
    b.finish(pop_next=True)
    inputs = random_operands(cfg, t, seed)
    product = np.einsum("mkbi,nkoi->mnbo", inputs["A"].astype(np.int64), inputs["B"].astype(np.int64))
    c = (product * repeats).astype(int_dtype(cfg.acc_bits)).astype(int_dtype(cfg.out_bits))
    return Workload(b.build(), inputs, {"C": c}, t.macs_per_block * cfg.macs_per_cycle * repeats)


def long_load(cfg: AcceleratorConfig, *, elems: int) -> Workload:
    """One LOAD WGT of `elems` contiguous elements: the memory system's streaming bandwidth."""
    b = ProgramBuilder(cfg)
    data = np.random.default_rng(0).integers(-128, 128, (elems, cfg.block_out, cfg.block_in))
    region = b.region("W", data.shape, np.dtype(int_dtype(cfg.wgt_bits)), "input")
    b.load(isa.MemType.WGT, region, 0, y_size=1, x_size=elems, push_next=True)
    b.finish(pop_prev=True)  # FINISH waits for the load to complete
    return Workload(b.build(), {"W": data.astype(int_dtype(cfg.wgt_bits))}, {}, 0)
