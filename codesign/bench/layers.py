"""`codesign bench layers`: the ten ResNet-18 convolutions after the first, default schedule
and virtual threads forced to 1: GEMM utilization and the gain of latency hiding."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from codesign.run.op import compile_and_run
from compiler.ops.accel import Conv2d
from compiler.ops.accel.resnet18 import BENCH_EPILOGUE, conv_specs
from compiler.target import AcceleratorTarget
from hw.config import AcceleratorConfig
from sim.backends import make_backend


@dataclass(frozen=True)
class LayerRow:
    """One convolution: its default schedule, and the same with one virtual thread."""

    name: str
    correct: bool | None
    cycles: int | None
    gemm_uops: int
    utilization: float | None
    cycles_vthreads1: int | None
    compile_s: float
    knobs: dict[str, Any]


@dataclass(frozen=True)
class LayersReport:
    """`codesign bench layers`: utilization over the layers, and the gain of latency hiding
    (cycles with one virtual thread over cycles with the default's); None without cycles."""

    config: str
    backend: str
    epilogue: dict[str, Any]
    layers: list[LayerRow]
    correct: bool
    utilization: float | None
    latency_hiding_gain: float | None
    max_compile_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(cfg: AcceleratorConfig, backend_name: str = "rtl", layers: list[str] | None = None) -> LayersReport:
    backend = make_backend(backend_name, cfg)
    target = AcceleratorTarget(cfg)
    rows = []
    for name, spec in conv_specs(BENCH_EPILOGUE)[1:]:
        if layers and name not in layers:
            continue
        op = Conv2d(spec, target)
        _, best = compile_and_run(op, backend)
        _, single = compile_and_run(op, backend, vthreads=1)
        rows.append(LayerRow(
            name=name, correct=None if best.correct is None else best.correct and single.correct,
            cycles=best.cycles, gemm_uops=best.gemm_uops, utilization=best.utilization,
            cycles_vthreads1=single.cycles, compile_s=best.compile_s, knobs=best.schedule["knobs"],
        ))
    timed = all(r.cycles for r in rows)
    total = sum(r.cycles or 0 for r in rows)
    return LayersReport(
        config=cfg.name, backend=backend_name, epilogue=BENCH_EPILOGUE.to_json(), layers=rows,
        correct=all(r.correct is not False for r in rows),
        utilization=sum(r.gemm_uops for r in rows) / total if timed else None,
        latency_hiding_gain=sum(r.cycles_vthreads1 or 0 for r in rows) / total if timed else None,
        max_compile_s=max(r.compile_s for r in rows),
    )
