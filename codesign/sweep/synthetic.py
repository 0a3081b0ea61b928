"""A synthetic stand-in for evaluating ResNet-18 on a point: analytical latency, area and energy.

This is *not* the workbench's evaluation (that compiles and times every layer): it is a cheap,
plausible model with the same trade-offs, used to develop and test search strategies while the
real exhaustive tables are not yet measured.  Per convolution (as a GEMM of M output pixels, K
reduction terms, N output channels, padded to the core's block shape):

* compute cycles = M * ceil(K / block_in) * ceil(N / block_out) / batch, plus a fixed cost per
  tile (pipeline fill, DMA set-up), so large blocks waste cycles on narrow layers;
* DRAM bytes: the tile of output channels held in the accumulator decides how often the inputs
  are re-read, and weights are re-read per pixel tile unless a whole K x n_tile slab fits the
  weight buffer; small input buffers mean short transfers that hide the DRAM latency poorly;
* latency = the larger of compute and memory time plus part of the smaller (imperfect overlap);
* area = a fixed part, the MAC array and each scratchpad (capacity, plus a cost for wide rows);
* energy = MACs (padded) + SRAM reads that cost more in larger buffers + DRAM bytes + leakage of
  the SRAM over the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codesign.sweep.records import PointResult
from codesign.sweep.space import Point
from hw.config import AcceleratorConfig


@dataclass(frozen=True)
class Gemm:
    """One convolution as a GEMM: M output pixels, K reduction terms, N output channels;
    `count` layers of this shape."""

    m: int
    k: int
    n: int
    count: int = 1


# ResNet-18 at 224x224: conv1, the four stages (3x3 convolutions and 1x1 downsampling), fc.
RESNET18 = (
    Gemm(112 * 112, 3 * 49, 64), Gemm(56 * 56, 64 * 9, 64, 4),
    Gemm(28 * 28, 64 * 9, 128), Gemm(28 * 28, 128 * 9, 128, 3), Gemm(28 * 28, 64, 128),
    Gemm(14 * 14, 128 * 9, 256), Gemm(14 * 14, 256 * 9, 256, 3), Gemm(14 * 14, 128, 256),
    Gemm(7 * 7, 256 * 9, 512), Gemm(7 * 7, 512 * 9, 512, 3), Gemm(7 * 7, 256, 512),
    Gemm(1, 512, 1000),
)
TILE_OVERHEAD_CYCLES = 40
OVERLAP_LOSS = 0.2  # the share of the shorter of compute and memory time that is not hidden
E_MAC_PJ, E_DRAM_PJ_PER_BYTE, E_SRAM_PJ_PER_BYTE = 0.25, 20.0, 0.06
LEAK_UW_PER_KIB = 1.5


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _layer(cfg: AcceleratorConfig, g: Gemm) -> tuple[float, float, float]:
    """(cycles, DRAM bytes, padded MACs) of one layer of shape `g` on `cfg`."""
    k_blocks, n_blocks = _ceil(g.k, cfg.block_in), _ceil(g.n, cfg.block_out)
    m = _ceil(g.m, cfg.batch)
    padded_macs = float(m * cfg.batch * k_blocks * cfg.block_in * n_blocks * cfg.block_out)
    # The accumulator (double-buffered, 4 bytes per sum) holds m_tile x n_tile partial sums.
    n_tile = min(n_blocks * cfg.block_out, max(cfg.block_out, (cfg.wgt_bytes // 2) // max(g.k, 1)))
    m_tile = max(1, min(m, (cfg.acc_bytes // 2) // (4 * cfg.batch * n_tile)))
    tiles = _ceil(m, m_tile) * _ceil(n_blocks * cfg.block_out, n_tile)
    inputs = float(g.m * g.k) * _ceil(g.n, n_tile)
    weights_fit = g.k * n_tile <= cfg.wgt_bytes // 2
    weights = float(g.k * g.n) * (1 if weights_fit else _ceil(m, m_tile))
    # Inputs stream through the input buffer in chunks of half its size: short transfers hide
    # the DRAM latency poorly.
    chunk = max(cfg.block_in * cfg.batch, cfg.inp_bytes // 2)
    transfers = inputs / chunk + weights / max(cfg.block_in * cfg.block_out, cfg.wgt_bytes // 2)
    dram_bytes = inputs + weights + float(g.m * g.n)
    memory = dram_bytes / cfg.dram_bytes_per_cycle + transfers * cfg.dram_latency_cycles / 4
    compute = m * k_blocks * n_blocks + tiles * TILE_OVERHEAD_CYCLES
    cycles = max(compute, memory) + OVERLAP_LOSS * min(compute, memory)
    return cycles, dram_bytes, padded_macs


def _sram_mm2(capacity_bytes: int, row_bytes: int) -> float:
    return capacity_bytes * 2.2e-6 * (1 + 0.12 * math.log2(max(row_bytes, 8) / 8)) + 0.02


def area_mm2(cfg: AcceleratorConfig) -> float:
    """The synthetic area: fixed logic, the MAC array, each scratchpad."""
    sram = (_sram_mm2(cfg.inp_bytes, cfg.batch * cfg.block_in)
            + _sram_mm2(cfg.wgt_bytes, cfg.block_in * cfg.block_out)
            + _sram_mm2(cfg.acc_bytes, 4 * cfg.batch * cfg.block_out) + _sram_mm2(cfg.uop_bytes, 4))
    return 0.3 + 0.0012 * cfg.macs_per_cycle + sram


def metrics(cfg: AcceleratorConfig, layers: tuple[Gemm, ...] = RESNET18) -> dict[str, float]:
    """latency_cycles, latency_ms, area_mm2, energy_uj and edp of one inference."""
    cycles = dram = macs = 0.0
    for g in layers:
        c, d, m = _layer(cfg, g)
        cycles, dram, macs = cycles + g.count * c, dram + g.count * d, macs + g.count * m
    sram_pj = E_SRAM_PJ_PER_BYTE * macs * (
        math.sqrt(cfg.inp_bytes / 8192) / cfg.block_out + math.sqrt(cfg.wgt_bytes / 65536) / cfg.batch
        + 8 * math.sqrt(cfg.acc_bytes / 32768) / cfg.block_in)
    latency_ms = cycles / (cfg.clock_mhz * 1e3)
    sram_kib = (cfg.inp_bytes + cfg.wgt_bytes + cfg.acc_bytes + cfg.uop_bytes) / 1024
    leak_pj = LEAK_UW_PER_KIB * sram_kib * latency_ms * 1e3  # uW x ms = nJ = 1e3 pJ
    energy_uj = (E_MAC_PJ * macs + E_DRAM_PJ_PER_BYTE * dram + sram_pj + leak_pj) * 1e-6
    return {"latency_cycles": cycles, "latency_ms": latency_ms, "area_mm2": area_mm2(cfg),
            "energy_uj": energy_uj, "edp": energy_uj * latency_ms}


def proxy_metrics(cfg: AcceleratorConfig, layers: tuple[Gemm, ...] = RESNET18) -> dict[str, float]:
    """A cruder model of the same point, as a strategy's cheap proxy: compute without the cost
    per tile, memory without the DRAM latency, time the larger of the two; energy the MACs, the
    DRAM bytes and the leakage only."""
    cycles = dram = macs = 0.0
    for g in layers:
        k_blocks, n_blocks = _ceil(g.k, cfg.block_in), _ceil(g.n, cfg.block_out)
        m = _ceil(g.m, cfg.batch)
        _, d, padded = _layer(cfg, g)
        compute = m * k_blocks * n_blocks
        cycles += g.count * max(compute, d / cfg.dram_bytes_per_cycle)
        dram, macs = dram + g.count * d, macs + g.count * padded
    latency_ms = cycles / (cfg.clock_mhz * 1e3)
    sram_kib = (cfg.inp_bytes + cfg.wgt_bytes + cfg.acc_bytes + cfg.uop_bytes) / 1024
    leak_pj = LEAK_UW_PER_KIB * sram_kib * latency_ms * 1e3
    energy_uj = (E_MAC_PJ * macs + E_DRAM_PJ_PER_BYTE * dram + leak_pj) * 1e-6
    return {"latency_cycles": cycles, "latency_ms": latency_ms, "energy_uj": energy_uj,
            "edp": energy_uj * latency_ms}


def evaluate(point: Point) -> PointResult:
    """The synthetic PointResult of `point` (every metric an 'estimate')."""
    values = metrics(point.config)
    return PointResult(point.id, (), values, {name: "estimate" for name in values})


__all__ = ["RESNET18", "Gemm", "area_mm2", "evaluate", "metrics", "proxy_metrics"]
