"""fsim speed on ResNet-18's conv2 as a matrix product (M=3136, K=576, N=64), int8."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hw.config import AcceleratorConfig
from hw.errors import InputError
from sim.fsim import FunctionalSimulator
from sim.workloads import GemmTiling, blocked_gemm

M, K, N = 3136, 576, 64


def _divisors(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def tiling_for(cfg: AcceleratorConfig, shape: tuple[int, int, int] = (M, K, N)) -> GemmTiling:
    """Two virtual threads; the tiles with the most work per tile (fewest instructions) that fit:
    inp and wgt hold two tiles each, acc two output blocks (or one when two do not fit)."""
    m, k, n = shape
    blocks = (m // cfg.batch, k // cfg.block_in, n // cfg.block_out)
    best: GemmTiling | None = None
    for n_tile in _divisors(blocks[2]):
        for k_tile in _divisors(blocks[1]):
            fits = [mt for mt in _divisors(blocks[0])
                    if 2 * mt * k_tile <= cfg.inp_depth and mt * n_tile <= cfg.acc_depth]
            if fits and 2 * n_tile * k_tile <= cfg.wgt_depth:
                t = GemmTiling(*blocks, fits[0], k_tile, n_tile, 2)
                if best is None or _work(t) > _work(best):
                    best = t
    if best is None:
        raise InputError(f"no tiling of a {m}x{k}x{n} GEMM fits the buffers of {cfg.name}")
    return best


def _work(t: GemmTiling) -> int:
    return t.m_tile * t.k_tile * t.n_tile


@dataclass(frozen=True)
class FsimSpeed:
    """`codesign bench fsim`: the functional simulator's rate on the blocked GEMM (median time)."""

    gmac_per_s: float
    macs: int
    seconds: float
    config: str
    shape: list[int]
    instructions: int
    repeats: int
    verified: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(cfg: AcceleratorConfig, *, repeats: int = 3) -> FsimSpeed:
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
    return FsimSpeed(gmac_per_s=round(work.macs / seconds / 1e9, 3), macs=work.macs,
                     seconds=round(seconds, 4), config=cfg.name, shape=[M, K, N],
                     instructions=len(work.program.insns), repeats=repeats, verified=correct)
