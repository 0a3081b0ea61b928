"""This host's peak: single-precision GEMM throughput measured once with numpy's BLAS (OpenBLAS
sgemm) under threadpoolctl's thread limit, cached on disk by CPU, numpy version and thread
count; and an accelerator config's peak, MACs per cycle x 2 x clock."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hw.cache import cache_root
from hw.config import AcceleratorConfig

GEMM_SIZE = 1024  # an sgemm of this size reaches BLAS's steady state on one core in ~15 ms
REPEATS = 7


@dataclass(frozen=True)
class Peak:
    """A device's peak in GOP/s (a multiply-add is two operations) and where the figure comes
    from ("measured: ..." or "modeled: ...")."""

    gops: float
    source: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def accelerator_peak(cfg: AcceleratorConfig) -> Peak:
    gops = cfg.macs_per_cycle * 2 * cfg.clock_mhz / 1e3
    return Peak(gops, f"modeled: {cfg.macs_per_cycle} MACs/cycle x 2 x {cfg.clock_mhz:g} MHz")


def cpu_peak(threads: int = 1, cached: bool = True) -> Peak:
    """The best of REPEATS float32 GEMMs of GEMM_SIZE cubed on `threads` BLAS threads, from the
    disk cache when this CPU, numpy and thread count were measured before."""
    key = f"{_cpu_name()}|numpy {np.__version__}|threads {threads}"
    path = cache_root() / "cpu_peak.json"
    table = _read(path) if cached else {}
    if key in table:
        return Peak(float(table[key]), f"measured: numpy sgemm {GEMM_SIZE}^3, {threads} thread(s) (cached)")
    gops = _measure(threads)
    table[key] = gops
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table, indent=1))
    except OSError:  # a read-only cache only costs the measurement next time
        pass
    return Peak(gops, f"measured: numpy sgemm {GEMM_SIZE}^3, {threads} thread(s)")


def _measure(threads: int) -> float:
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((GEMM_SIZE, GEMM_SIZE)).astype(np.float32) for _ in range(2))
    out = np.empty_like(a)
    best = float("inf")
    with threadpool_limits(limits=threads, user_api="blas"):
        np.matmul(a, b, out=out)  # warm-up
        for _ in range(REPEATS):
            start = time.perf_counter()
            np.matmul(a, b, out=out)
            best = min(best, time.perf_counter() - start)
    return 2 * GEMM_SIZE**3 / best / 1e9


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _read(path: Any) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
