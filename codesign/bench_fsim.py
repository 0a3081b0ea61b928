"""fsim speed on ResNet-18's conv2 as a matrix product (M=3136, K=576, N=64), int8."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hw.config import AcceleratorConfig
from sim.fsim import FunctionalSimulator
from sim.workloads import GemmTiling, blocked_gemm

M, K, N = 3136, 576, 64


def tiling_for(cfg: AcceleratorConfig) -> GemmTiling:
    """Whole-K tiles, two virtual threads: inp half holds m_tile x K, acc m_tile x N."""
    m_blocks, k_blocks, n_blocks = M // cfg.batch, K // cfg.block_in, N // cfg.block_out
    m_tile = min(cfg.inp_depth // (2 * k_blocks), cfg.acc_depth // n_blocks, m_blocks)
    while m_blocks % m_tile:
        m_tile -= 1
    return GemmTiling(m_blocks, k_blocks, n_blocks, m_tile, k_blocks, n_blocks, 2)


def run(cfg: AcceleratorConfig, *, repeats: int = 3) -> dict[str, Any]:
    work = blocked_gemm(cfg, tiling_for(cfg), seed=0)
    sim = FunctionalSimulator(cfg)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = sim.run(work.program, work.inputs)
        times.append(time.perf_counter() - start)
    correct = all(np.array_equal(result.outputs[k], v) for k, v in work.expected.items())
    if not correct:
        raise AssertionError("fsim benchmark output differs from the numpy reference")
    seconds = float(np.median(times))
    return {"gmac_per_s": round(work.macs / seconds / 1e9, 3), "macs": work.macs,
            "seconds": round(seconds, 4), "config": cfg.name, "shape": [M, K, N],
            "instructions": len(work.program.insns), "repeats": repeats,
            "verified": correct}  # fmt: skip
