"""How well the timing model predicts the RTL: a corpus of programs, run on both, compared.

`corpus(cfg)` gathers programs by class -- the conformance suite and seeded random differential
programs spread over DRAM latencies and bandwidths -- each with the inputs the rtl backend
needs and the DRAM model to run it under.  More classes plug in as sources
(`corpus(cfg, extra={"gemm": ..., "resnet18": ...})`): a source is a function of the config that
returns `CorpusProgram`s, so the long GEMMs of `codesign bench` and layers compiled by
`compiler/` join without sim importing either (`gemm_programs` builds the GEMM ones).

`compare(cfg, programs)` runs every program on timing and on rtl (and on fsim, whose functional
counters timing must equal exactly) and returns a `FidelityReport`: per-program cycles and
errors, MAPE and maximum error per class and overall, per-module busy-cycle errors, and the
wall-clock speed ratio rtl/timing on the long programs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hw.config import AcceleratorConfig
from hw.errors import InputError
from hw.program import Program
from sim.backend import Stats
from sim.workloads import GemmTiling

BUSY = ("load_busy_cycles", "compute_busy_cycles", "store_busy_cycles", "gemm_busy_cycles")
# DRAM models the random programs are spread over: latency in cycles, and bandwidth in bytes
# per cycle as a multiple of the bus word (fractions: slower than one word per cycle).
LATENCIES = (1, 4, 16, 64, 150)
BANDWIDTHS = (0.125, 0.5, 1, 2)


@dataclass(frozen=True)
class CorpusProgram:
    name: str
    klass: str  # "conformance", "random", "gemm", ... (the rows of the per-class table)
    program: Program
    inputs: Mapping[str, np.ndarray]
    dram_latency_cycles: int | None = None  # None: the config's
    dram_bytes_per_cycle: int | None = None
    long: bool = False  # counts for the speed ratio and the busy-cycle errors


Source = Callable[[AcceleratorConfig], list[CorpusProgram]]


def conformance_programs(cfg: AcceleratorConfig) -> list[CorpusProgram]:
    """The ISA conformance suite, minus the cases that must fail (no cycles to compare)."""
    from sim.conformance import CASES

    out = []
    for case in CASES:
        built = case.build(cfg)
        if built.error is None:
            out.append(CorpusProgram(case.name, "conformance", built.program, built.inputs))
    return out


def random_programs(cfg: AcceleratorConfig, count: int = 200, seed: int = 0) -> list[CorpusProgram]:
    """`count` random differential programs, round-robin over LATENCIES x BANDWIDTHS."""
    from sim.random_programs import random_program

    grid = [(lat, bw) for bw in BANDWIDTHS for lat in LATENCIES]
    out = []
    for i in range(count):
        lat, bw = grid[i % len(grid)]
        rp = random_program(cfg, seed + i)
        out.append(CorpusProgram(f"random_{seed + i}", "random", rp.program, rp.inputs, lat,
                                 max(1, int(bw * cfg.bus_bytes))))
    return out


def gemm_programs(cfg: AcceleratorConfig, tilings: Mapping[str, GemmTiling]) -> list[CorpusProgram]:
    """Blocked GEMMs (sim.workloads), one per named tiling: the long programs."""
    from sim.workloads import blocked_gemm

    return [CorpusProgram(name, "gemm", w.program, w.inputs, long=True)
            for name, w in ((n, blocked_gemm(cfg, t, seed=0)) for n, t in tilings.items())]


# The classes every config has; `codesign bench fidelity` adds the long GEMMs of `codesign
# bench` (their tiling search lives in codesign) and, when available, compiled layers.
SOURCES: Mapping[str, Source] = {"conformance": conformance_programs, "random": random_programs}


def corpus(cfg: AcceleratorConfig, *, classes: Sequence[str] | None = None,
           extra: Mapping[str, Source] | None = None) -> list[CorpusProgram]:
    """The programs of `classes` (default: every source, the `extra` ones included)."""
    sources = {**SOURCES, **(extra or {})}
    unknown = sorted(set(classes or ()) - set(sources))
    if unknown:
        raise InputError(f"unknown program class(es) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(sources))}")
    out: list[CorpusProgram] = []
    for name, source in sources.items():
        if classes is None or name in classes:
            out.extend(source(cfg))
    return out


# -- comparison ---------------------------------------------------------------------------------


@dataclass
class ProgramFidelity:
    name: str
    klass: str
    cycles_rtl: int
    cycles_timing: int
    busy_errors: dict[str, float]  # per module: (timing - rtl) / rtl, 0 where both are 0
    functional_equal: bool  # timing's functional counters == fsim's
    seconds_rtl: float
    seconds_timing: float
    long: bool
    dram_latency_cycles: int
    dram_bytes_per_cycle: int

    @property
    def error(self) -> float:
        return (self.cycles_timing - self.cycles_rtl) / self.cycles_rtl

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "class": self.klass, "cycles_rtl": self.cycles_rtl,
                "cycles_timing": self.cycles_timing, "error": self.error,
                "busy_errors": self.busy_errors, "functional_equal": self.functional_equal,
                "seconds_rtl": self.seconds_rtl, "seconds_timing": self.seconds_timing,
                "long": self.long, "dram_latency_cycles": self.dram_latency_cycles,
                "dram_bytes_per_cycle": self.dram_bytes_per_cycle}


@dataclass
class FidelityReport:
    config: str
    programs: list[ProgramFidelity] = field(default_factory=list)

    @staticmethod
    def _summary(rows: Sequence[ProgramFidelity]) -> dict[str, Any]:
        errors = np.abs([r.error for r in rows]) if rows else np.zeros(0)
        return {"count": len(rows), "mape": float(errors.mean()) if rows else 0.0,
                "max_error": float(errors.max()) if rows else 0.0}

    @property
    def mape(self) -> float:
        return float(self._summary(self.programs)["mape"])

    @property
    def max_error(self) -> float:
        return float(self._summary(self.programs)["max_error"])

    def classes(self) -> dict[str, dict[str, Any]]:
        names = sorted({r.klass for r in self.programs})
        return {k: self._summary([r for r in self.programs if r.klass == k]) for k in names}

    def busy_errors(self) -> dict[str, float]:
        """The largest |busy-cycle error| per module over the long programs."""
        long = [r for r in self.programs if r.long]
        return {m: max((abs(r.busy_errors[m]) for r in long), default=0.0) for m in BUSY}

    @property
    def speed_ratio(self) -> float | None:
        """rtl seconds / timing seconds, summed over the long programs (None without any)."""
        long = [r for r in self.programs if r.long]
        timing = sum(r.seconds_timing for r in long)
        return sum(r.seconds_rtl for r in long) / timing if long and timing > 0 else None

    def functional_mismatches(self) -> list[str]:
        return [r.name for r in self.programs if not r.functional_equal]

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "programs": [r.to_json() for r in self.programs],
                "mape": self.mape, "max_error": self.max_error, "classes": self.classes(),
                "busy_errors": self.busy_errors(), "speed_ratio": self.speed_ratio,
                "functional_mismatches": self.functional_mismatches()}


def compare(cfg: AcceleratorConfig, programs: Sequence[CorpusProgram], *, timing_repeats: int = 3,
            progress: Callable[[int, int], None] | None = None) -> FidelityReport:
    """Run each program on timing (best of `timing_repeats` wall-clock times), rtl and fsim;
    `progress(done, total)` after each."""
    report = FidelityReport(cfg.name)
    for i, p in enumerate(programs):
        report.programs.append(compare_one(cfg, p, timing_repeats=timing_repeats))
        if progress is not None:
            progress(i + 1, len(programs))
    return report


def compare_one(cfg: AcceleratorConfig, p: CorpusProgram, *, timing_repeats: int = 3) -> ProgramFidelity:
    from sim.fsim import FunctionalSimulator
    from sim.rtl.backend import RtlSimulator
    from sim.timing import TimingSimulator

    lat = p.dram_latency_cycles or cfg.dram_latency_cycles
    bw = p.dram_bytes_per_cycle or cfg.dram_bytes_per_cycle
    timing_sim = TimingSimulator(cfg, dram_latency_cycles=lat, dram_bytes_per_cycle=bw)
    rtl_sim = RtlSimulator(cfg, dram_latency_cycles=lat, dram_bytes_per_cycle=bw)
    seconds = []
    for _ in range(max(1, timing_repeats)):
        start = time.perf_counter()
        timing = timing_sim.run(p.program, p.inputs).stats
        seconds.append(time.perf_counter() - start)
    start = time.perf_counter()
    rtl = rtl_sim.run(p.program, p.inputs).stats
    seconds_rtl = time.perf_counter() - start
    functional = FunctionalSimulator(cfg).run(p.program, p.inputs).stats.functional()
    return ProgramFidelity(p.name, p.klass, rtl.cycles or 0, timing.cycles or 0, _busy_errors(timing, rtl),
                           timing.functional() == functional, seconds_rtl, min(seconds), p.long,
                           lat, bw)


def _busy_errors(timing: Stats, rtl: Stats) -> dict[str, float]:
    out = {}
    for m in BUSY:
        t, r = getattr(timing, m) or 0, getattr(rtl, m) or 0
        out[m] = (t - r) / r if r else float(t != 0)
    return out
