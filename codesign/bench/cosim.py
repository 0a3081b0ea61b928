"""Verilator co-simulation speed: the C++ harness on a long blocked GEMM, and pyverilator.

The workload is bench_fsim's (ResNet-18 conv2 as a matrix product).  The harness runs it to
completion; pyverilator, about 100x slower, runs its first `PYVERILATOR_CYCLES` cycles.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.bench.fsim import K, M, N, tiling_for
from hw.config import AcceleratorConfig
from sim.backend import SimulationError
from sim.rtl.backend import RtlSimulator
from sim.rtl.build import build_info
from sim.rtl.signal import SignalSim
from sim.workloads import blocked_gemm

PYVERILATOR_CYCLES = 20_000


@dataclass(frozen=True)
class CosimSpeed:
    """`codesign bench cosim`: the C++ harness's and pyverilator's rates on the blocked GEMM."""

    cycles_per_s: int
    cycles: int
    seconds: float
    build_s: float
    build_cached: bool
    pyverilator_cycles_per_s: int
    macs_per_cycle: float | None
    config: str
    instructions: int
    verified: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(cfg: AcceleratorConfig, *, pyverilator_cycles: int = PYVERILATOR_CYCLES,
        shape: tuple[int, int, int] = (M, K, N)) -> CosimSpeed:
    work = blocked_gemm(cfg, tiling_for(cfg, shape), seed=0)
    start = time.perf_counter()
    sim = RtlSimulator(cfg)
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    result = sim.run(work.program, work.inputs)
    seconds = time.perf_counter() - start
    cycles = result.stats.cycles or 0
    correct = all(np.array_equal(result.outputs[k], v) for k, v in work.expected.items())
    return CosimSpeed(
        cycles_per_s=round(cycles / seconds), cycles=cycles, seconds=round(seconds, 3),
        build_s=_build_seconds(sim.library_path), build_cached=setup_s < 5,
        pyverilator_cycles_per_s=_pyverilator_speed(cfg, work.program, work.inputs, pyverilator_cycles),
        macs_per_cycle=round(work.macs / cycles, 2) if cycles else None,
        config=cfg.name, instructions=len(work.program.insns), verified=correct,
    )


def _pyverilator_speed(cfg: AcceleratorConfig, program: Any, inputs: Any, cycles: int) -> int:
    signal = SignalSim(cfg)
    start = time.perf_counter()
    try:
        done = signal.run(program, inputs, max_cycles=cycles).stats.cycles or cycles
    except SimulationError:  # the cycle limit: the expected way out
        done = cycles
    return round(done / (time.perf_counter() - start))


def _build_seconds(library: Path) -> float:
    """How long the Verilator build of `library` took, as its build recorded."""
    seconds = build_info(library)["seconds"]
    assert isinstance(seconds, int | float), seconds
    return float(seconds)
