"""`codesign bench cpu-convs`: each convolution of a zoo model on our CPU target and on
onnxruntime, in GFLOP/s and as a fraction of this host's measured single-thread peak.

Both run the whole model, alternating, one thread: ours timed per step (CpuModel.run's step
records), onnxruntime per node from its own profiler (`enable_profiling`, the kernel time of
each node, its fused epilogues included).  Convolutions are matched in graph order by their
geometry (data and weight shapes; onnxruntime's int8 kernels take NHWC data and show no shape
for their prepacked weights, so int8 convolutions reading the same input are told apart by
order only), since onnxruntime renames the nodes it fuses.  The peak is
re-measured here (codesign.compare.peak.cpu_peak, not the cached figure: one taken while the
host was loaded would flatter both).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

CONV_OPS = ("Conv", "QConv")


@dataclass(frozen=True)
class ConvRow:
    """One convolution: our step's name, its data and weight shapes, GFLOP (2 x MACs), the
    median milliseconds and GFLOP/s of ours and onnxruntime's, each as a fraction of peak."""

    name: str
    data: tuple[int, ...]
    weight: tuple[int, ...]
    gflop: float
    ours_ms: float
    ours_gflops: float
    ours_of_peak: float
    ort_node: str | None
    ort_ms: float | None
    ort_gflops: float | None
    ort_of_peak: float | None


@dataclass(frozen=True)
class CpuConvsReport:
    model: str
    precision: str
    peak_gflops: float
    peak_source: str
    rounds: int
    ours_ms: float  # the whole model, median
    ort_ms: float
    rows: tuple[ConvRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "rows"},
                "rows": [asdict(r) for r in self.rows]}


def run(model: str = "resnet18", precision: str = "fp32", rounds: int = 10,
        tuning_log: str | None = None, say: Callable[[str], None] | None = None) -> CpuConvsReport:
    """Compile zoo `model` for our CPU target and onnxruntime at `precision`, time `rounds`
    alternating runs after two warm-ups, and match their convolutions."""
    import onnx
    import onnxruntime as ort

    from codesign import zoo
    from codesign.compare.peak import cpu_peak
    from codesign.run.ort_quant import ort_qdq, vendor_session_options
    from compiler.driver import compile_cpu
    from compiler.frontend import import_onnx
    from compiler.tune.cpu import read_log

    say = say or (lambda _: None)
    tuned = read_log(tuning_log) if tuning_log else None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{model}.onnx"
        onnx.save(zoo.build(model), path)
        data, graph = path.read_bytes(), import_onnx(str(path))
        calibration = zoo.sample_inputs(model, 16, seed=1000) if precision == "int8" else []
        say("compiling")
        ours = compile_cpu(graph, precision, calibration, tuned=tuned)
        options = vendor_session_options(1)
        options.enable_profiling = True  # type: ignore[attr-defined]
        options.profile_file_prefix = str(Path(tmp) / "ort")  # type: ignore[attr-defined]
        session = ort.InferenceSession(data if precision == "fp32" else ort_qdq(data, calibration),
                                       options, providers=["CPUExecutionProvider"])
        feeds = zoo.sample_inputs(model, 1, seed=0)[0]
        say("timing")
        steps, totals = _time(ours, session, feeds, rounds)
        events = json.loads(Path(session.end_profiling()).read_text())
    say("measuring the peak")
    peak = cpu_peak(1, cached=False)
    ort_nodes = _ort_convs(events)
    rows = tuple(_row(step, times, ort_nodes, peak.gops) for step, times in steps)
    return CpuConvsReport(model, precision, peak.gops, peak.source, rounds, totals[0], totals[1], rows)


def _time(model: Any, session: Any, feeds: dict[str, np.ndarray], rounds: int
          ) -> tuple[list[tuple[Any, list[float]]], tuple[float, float]]:
    names = {i.name for i in session.get_inputs()}
    ort_feeds = {k: v for k, v in feeds.items() if k in names}
    per_step: dict[str, list[float]] = defaultdict(list)
    ours, theirs = [], []
    for r in range(rounds + 2):
        start = time.perf_counter()
        result = model.run(feeds)
        mid = time.perf_counter()
        session.run(None, ort_feeds)
        end = time.perf_counter()
        if r < 2:
            continue
        ours.append(mid - start)
        theirs.append(end - mid)
        for record in result.steps:
            per_step[record.name].append(record.host_s)
    convs = [(s, per_step[s.name]) for s in model.steps
             if s.where == "host" and s.node.op in CONV_OPS]
    return convs, (statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3)


def _ort_convs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """onnxruntime's convolution nodes in execution order: name, data and weight shapes, and
    the median kernel seconds over the profiled runs."""
    times: dict[str, list[float]] = defaultdict(list)
    shapes: dict[str, tuple[tuple[int, ...], ...]] = {}
    order: list[str] = []
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        args = e.get("args", {})
        if "Conv" not in args.get("op_name", ""):
            continue
        name = e["name"][: -len("_kernel_time")]
        four = [tuple(next(iter(t.values()))) for t in args.get("input_type_shape", [])]
        shapes[name] = tuple(s for s in four if len(s) == 4)[:2]
        if name not in times:
            order.append(name)
        times[name].append(e["dur"] * 1e-6)
    return [{"name": n, "shapes": shapes[n], "s": statistics.median(times[n])} for n in order]


def _row(step: Any, times: list[float], ort_nodes: list[dict[str, Any]], peak: float) -> ConvRow:
    from compiler.ops.cpu import host_op

    op: Any = host_op(*step.specs[0][:1], **step.specs[0][1])
    data, weight = tuple(op.shape), tuple(op.weight_shape)
    gflop = 2 * step.macs / 1e9
    ours_s = statistics.median(times)
    match = next((n for n in ort_nodes if _same(n["shapes"], data, weight)), None)
    if match is not None:
        ort_nodes.remove(match)
    ort_s = match["s"] if match else None
    return ConvRow(step.name, data, weight, gflop, ours_s * 1e3, gflop / ours_s, gflop / ours_s / peak,
                   match["name"] if match else None, ort_s * 1e3 if ort_s else None,
                   gflop / ort_s if ort_s else None, gflop / ort_s / peak if ort_s else None)


def _same(shapes: tuple[tuple[int, ...], ...], data: tuple[int, ...], weight: tuple[int, ...]) -> bool:
    """Whether onnxruntime's node reads `data` (NCHW, or NHWC as its int8 kernels take it) and
    `weight` (where the profile shows it: a prepacked int8 weight has no shape there)."""
    if not shapes:
        return False
    n, c, h, w = data
    return shapes[0] in (data, (n, h, w, c)) and (len(shapes) < 2 or shapes[1] == weight)


def table(report: CpuConvsReport) -> str:
    """A Markdown table of the report (the README's)."""
    lines = [f"{report.model} {report.precision}, one thread; peak {report.peak_gflops:.0f} GFLOP/s "
             f"({report.peak_source}); whole model: ours {report.ours_ms:.1f} ms, onnxruntime "
             f"{report.ort_ms:.1f} ms", "",
             "| convolution | data | weight | GFLOP | ours GFLOP/s | ours % peak | onnxruntime GFLOP/s "
             "| onnxruntime % peak |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in report.rows:
        ort = (f"{r.ort_gflops:.1f} | {100 * r.ort_of_peak:.0f}%" if r.ort_gflops is not None
               and r.ort_of_peak is not None else "- | -")
        lines.append(f"| {r.name} | {'x'.join(map(str, r.data))} | {'x'.join(map(str, r.weight))} | "
                     f"{r.gflop:.3f} | {r.ours_gflops:.1f} | {100 * r.ours_of_peak:.0f}% | {ort} |")
    return "\n".join(lines)


__all__ = ["ConvRow", "CpuConvsReport", "run", "table"]
