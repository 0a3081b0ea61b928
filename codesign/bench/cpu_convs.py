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

`ops="all"` profiles every operator kind besides: ours per step kind (a fused step is named by
its nodes, "Conv+Clip", "MatMul+Add+Gelu"), onnxruntime per node kind (its own fused kinds,
"FusedConv", "SkipLayerNormalization"), each the count and the sum of per-node median times;
the two lists differ where the fusions differ, so they are shown side by side, not matched.
The whole-model times come with their spread: the quartiles of each, and of the ratio taken per
round (ours over onnxruntime's run right after it), which a loaded host disturbs least.
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
OPS = ("convs", "all")


@dataclass(frozen=True)
class OpKind:
    """One operator kind of a model: how many steps (or nodes) and their summed median ms."""

    kind: str
    count: int
    ms: float


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
    ours_quartiles: tuple[float, float] = (0.0, 0.0)  # whole model, ms
    ort_quartiles: tuple[float, float] = (0.0, 0.0)
    ratio: tuple[float, float, float] = (0.0, 0.0, 0.0)  # per-round ours/onnxruntime: q1, median, q3
    ours_kinds: tuple[OpKind, ...] = ()  # ops="all": every kind, largest first
    ort_kinds: tuple[OpKind, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(model: str = "resnet18", precision: str = "fp32", rounds: int = 10,
        tuning_log: str | None = None, say: Callable[[str], None] | None = None,
        ops: str = "convs") -> CpuConvsReport:
    """Compile zoo `model` for our CPU target and onnxruntime at `precision`, time `rounds`
    alternating runs after two warm-ups, and match their convolutions; `ops` "all" adds every
    operator kind of both (see the module docstring)."""
    if ops not in OPS:
        raise ValueError(f"ops must be one of {', '.join(OPS)}, not {ops!r}")
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
        per_step, ours_s, ort_s = _time(ours, session, feeds, rounds)
        events = json.loads(Path(session.end_profiling()).read_text())
    say("measuring the peak")
    peak = cpu_peak(1, cached=False)
    ort_nodes = _ort_convs(events)
    rows = tuple(_row(step, per_step[step.name], ort_nodes, peak.gops) for step in ours.steps
                 if step.where == "host" and step.node.op in CONV_OPS)
    kinds = (_our_kinds(ours.steps, per_step), _ort_kinds(events)) if ops == "all" else ((), ())
    return CpuConvsReport(model, precision, peak.gops, peak.source, rounds, statistics.median(ours_s) * 1e3,
                          statistics.median(ort_s) * 1e3, rows, _quartiles(ours_s, 1e3),
                          _quartiles(ort_s, 1e3), _ratio(ours_s, ort_s), *kinds)


def _quartiles(values: list[float], scale: float) -> tuple[float, float]:
    if len(values) < 2:
        return values[0] * scale, values[0] * scale
    q = statistics.quantiles(values, n=4)
    return q[0] * scale, q[2] * scale


def _ratio(ours: list[float], theirs: list[float]) -> tuple[float, float, float]:
    """The quartiles and median of ours/theirs taken round by round."""
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    q1, q3 = _quartiles(ratios, 1.0)
    return q1, statistics.median(ratios), q3


def _our_kinds(steps: list[Any], per_step: dict[str, list[float]]) -> tuple[OpKind, ...]:
    """Our steps by kind (views cost nothing and are left out)."""
    count: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    for step in steps:
        if step.where == "view" or step.name not in per_step:
            continue
        count[step.op] += 1
        total[step.op] += statistics.median(per_step[step.name]) * 1e3
    return _ranked(count, total)


def _ort_kinds(events: list[dict[str, Any]]) -> tuple[OpKind, ...]:
    """onnxruntime's nodes by op kind, from its profile's kernel times."""
    times: dict[str, list[float]] = defaultdict(list)
    kind: dict[str, str] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            times[name].append(e["dur"] * 1e-3)
            kind[name] = e.get("args", {}).get("op_name", "?")
    count: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    for name, ms in times.items():
        count[kind[name]] += 1
        total[kind[name]] += statistics.median(ms)
    return _ranked(count, total)


def _ranked(count: dict[str, int], total: dict[str, float]) -> tuple[OpKind, ...]:
    return tuple(OpKind(k, count[k], total[k]) for k in sorted(total, key=lambda k: (-total[k], k)))


def _time(model: Any, session: Any, feeds: dict[str, np.ndarray], rounds: int
          ) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Per-step seconds of ours, and the whole-model seconds of both, round by round."""
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
    return per_step, ours, theirs


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
    (o1, o3), (r1, r3), (q1, ratio, q3) = report.ours_quartiles, report.ort_quartiles, report.ratio
    lines = [f"{report.model} {report.precision}, one thread; peak {report.peak_gflops:.0f} GFLOP/s "
             f"({report.peak_source}); whole model, median (quartiles) of {report.rounds} alternating "
             f"rounds: ours {report.ours_ms:.1f} ms ({o1:.1f}-{o3:.1f}), onnxruntime {report.ort_ms:.1f} ms "
             f"({r1:.1f}-{r3:.1f}); ours/onnxruntime per round {ratio:.2f} ({q1:.2f}-{q3:.2f})", "",
             "| convolution | data | weight | GFLOP | ours GFLOP/s | ours % peak | onnxruntime GFLOP/s "
             "| onnxruntime % peak |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in report.rows:
        ort = (f"{r.ort_gflops:.1f} | {100 * r.ort_of_peak:.0f}%" if r.ort_gflops is not None
               and r.ort_of_peak is not None else "- | -")
        lines.append(f"| {r.name} | {'x'.join(map(str, r.data))} | {'x'.join(map(str, r.weight))} | "
                     f"{r.gflop:.3f} | {r.ours_gflops:.1f} | {100 * r.ours_of_peak:.0f}% | {ort} |")
    if report.ours_kinds or report.ort_kinds:
        lines += ["", *kinds_table(report.ours_kinds, report.ort_kinds)]
    return "\n".join(lines)


def kinds_table(ours: tuple[OpKind, ...], theirs: tuple[OpKind, ...]) -> list[str]:
    """Both kind lists side by side, largest first, with their totals (Markdown)."""
    lines = ["| ours: step kind | steps | ms | onnxruntime: node kind | nodes | ms |",
             "|---|---:|---:|---|---:|---:|"]
    for i in range(max(len(ours), len(theirs))):
        left = f"{ours[i].kind} | {ours[i].count} | {ours[i].ms:.3f}" if i < len(ours) else " | | "
        right = f"{theirs[i].kind} | {theirs[i].count} | {theirs[i].ms:.3f}" if i < len(theirs) else " | | "
        lines.append(f"| {left} | {right} |")
    lines.append(f"| total | {sum(k.count for k in ours)} | {sum(k.ms for k in ours):.3f} | total | "
                 f"{sum(k.count for k in theirs)} | {sum(k.ms for k in theirs):.3f} |")
    return lines


__all__ = ["ConvRow", "CpuConvsReport", "OpKind", "kinds_table", "run", "table"]
