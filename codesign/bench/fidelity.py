"""`codesign bench fidelity`: the timing model against the RTL, program by program.

The corpus is sim.fidelity's (conformance suite, random differential programs over DRAM
latencies and bandwidths) plus the long blocked GEMMs of `codesign bench` (ResNet-18's conv2 as
bench fsim/cosim run it, and a 1024x512x64 GEMM with two and with one virtual thread) and the
ResNet-18 layers compiled as `codesign bench layers` compiles them.  More classes join through
`EXTRA_SOURCES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codesign.bench.fsim import K, M, N, tiling_for
from hw.config import AcceleratorConfig
from sim import fidelity
from sim.fidelity import CorpusProgram, FidelityReport

SMALL_GEMM = (1024, 512, 64)


def long_gemms(cfg: AcceleratorConfig) -> list[CorpusProgram]:
    conv2 = tiling_for(cfg, (M, K, N))
    small = tiling_for(cfg, SMALL_GEMM)
    tilings = {f"gemm_{M}x{K}x{N}_vt2": conv2, "gemm_1024x512x64_vt2": small,
               "gemm_1024x512x64_vt1": dataclasses.replace(small, virtual_threads=1)}
    return fidelity.gemm_programs(cfg, tilings)


def resnet18_layers(cfg: AcceleratorConfig) -> list[CorpusProgram]:
    """The ten ResNet-18 convolutions after the first, as `codesign bench layers` compiles them
    (default schedule, bench epilogue), with seeded inputs; none on a config the layers do not
    map to (batch 1 on a core of batch 2, for instance)."""
    from compiler.errors import ScheduleError
    from compiler.ops.accel import Conv2d, compile_op
    from compiler.ops.accel.resnet18 import BENCH_EPILOGUE, conv_specs
    from compiler.target import AcceleratorTarget

    target = AcceleratorTarget(cfg)
    out = []
    for name, spec in conv_specs(BENCH_EPILOGUE)[1:]:
        try:
            op = Conv2d(spec, target)
            compiled = compile_op(op, knobs=op.default_knobs(None))
        except ScheduleError:
            continue
        out.append(CorpusProgram(f"resnet18_{name}", "resnet18", compiled.built.program,
                                 op.random_inputs(0), long=True))
    return out


# Program classes beyond sim.fidelity.SOURCES, by name.
EXTRA_SOURCES: Mapping[str, fidelity.Source] = {"gemm": long_gemms, "resnet18": resnet18_layers}


def run(cfg: AcceleratorConfig, *, classes: Sequence[str] | None = None, random_count: int = 200,
        progress: Callable[[int, int], None] | None = None) -> FidelityReport:
    sources = {**EXTRA_SOURCES, "random": lambda c: fidelity.random_programs(c, random_count)}
    programs = fidelity.corpus(cfg, classes=classes, extra=sources)
    return fidelity.compare(cfg, programs, progress=progress)


def table(report: FidelityReport) -> str:
    lines = [f"{'program':32s} {'class':12s} {'lat':>4s} {'B/cyc':>5s} {'rtl':>10s} "
             f"{'timing':>10s} {'error':>8s}"]
    for r in report.programs:
        lines.append(f"{r.name:32s} {r.klass:12s} {r.dram_latency_cycles:4d} "
                     f"{r.dram_bytes_per_cycle:5d} {r.cycles_rtl:10d} {r.cycles_timing:10d} "
                     f"{100 * r.error:7.2f}%")
    lines.append("")
    lines.append(f"{'class':12s} {'programs':>8s} {'MAPE':>8s} {'max':>8s}")
    for klass, s in {**report.classes(), "all": _all(report)}.items():
        lines.append(f"{klass:12s} {s['count']:8d} {100 * s['mape']:7.2f}% {100 * s['max_error']:7.2f}%")
    lines.append("")
    lines.append("busy-cycle error on the long programs (max |timing - rtl| / rtl):")
    for module, error in report.busy_errors().items():
        lines.append(f"  {module:20s} {100 * error:7.2f}%")
    ratio = report.speed_ratio
    lines.append(f"speed ratio rtl/timing on the long programs: "
                 f"{'n/a' if ratio is None else f'{ratio:.0f}x'}")
    mismatches = report.functional_mismatches()
    lines.append(f"functional counters equal to fsim's: "
                 f"{'all' if not mismatches else 'NOT ' + ', '.join(mismatches)}")
    return "\n".join(lines)


def _all(report: FidelityReport) -> dict[str, Any]:
    return {"count": len(report.programs), "mape": report.mape, "max_error": report.max_error}
