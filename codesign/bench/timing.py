"""Timing-model speed on the long blocked GEMM of `codesign bench` (ResNet-18 conv2)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from codesign.bench.fsim import K, M, N, tiling_for
from hw.config import AcceleratorConfig
from sim.timing import TimingSimulator
from sim.workloads import blocked_gemm


@dataclass(frozen=True)
class TimingSpeed:
    """`codesign bench timing`: the timing model's rate on the long blocked GEMM (best time)."""

    seconds: float
    first_run_s: float
    cycles: int
    cycles_per_s: int
    instructions: int
    config: str
    shape: list[int]
    macs_per_cycle: float
    repeats: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(cfg: AcceleratorConfig, *, repeats: int = 5) -> TimingSpeed:
    work = blocked_gemm(cfg, tiling_for(cfg, (M, K, N)), seed=0)
    sim = TimingSimulator(cfg)  # builds the model on first use (cached)
    times = []
    stats = None
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        stats = sim.run(work.program, work.inputs).stats
        times.append(time.perf_counter() - start)
    assert stats is not None and stats.cycles
    best = min(times)
    return TimingSpeed(seconds=round(best, 5), first_run_s=round(times[0], 5), cycles=stats.cycles,
                       cycles_per_s=round(stats.cycles / best), instructions=len(work.program.insns),
                       config=cfg.name, shape=[M, K, N], macs_per_cycle=round(work.macs / stats.cycles, 2),
                       repeats=repeats)
