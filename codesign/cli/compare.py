"""`codesign compare MODEL.onnx [--config X ...] [--backends accel,cpu,onnxruntime]
[--precision fp32,int8] [--threads N] [--repeat N] [--json] [-o DIR]`: one table (and, with -o,
one figure) per model."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from codesign.cli.output import emit
from hw.errors import InputError

if TYPE_CHECKING:
    from codesign.compare import CompareReport


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="a model on the accelerator (simulated), our CPU target and "
                       "onnxruntime: latency, throughput, GOP/s against peak, agreement")
    p.add_argument("model", nargs="+", metavar="MODEL.onnx")
    p.add_argument("--config", action="append", default=[], metavar="PRESET|FILE",
                   help="an accelerator design (repeatable: side by side; default vta)")
    p.add_argument("--backends", default="accel,cpu,onnxruntime", metavar="B[,B...]",
                   help="accel, cpu, onnxruntime, gpu (an NVIDIA GPU, fp32) (default the first three)")
    p.add_argument("--precision", default=None, metavar="P[,P...]",
                   help="fp32 and/or int8 for the cpu and onnxruntime backends (default both; the "
                        "accelerator runs int8)")
    p.add_argument("--threads", type=int, default=1, help="threads of each CPU backend (default 1)")
    p.add_argument("--repeat", type=int, default=10, help="timed rounds after warm-up (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    p.add_argument("--inputs", type=int, default=1, help="inputs compared with onnxruntime fp32 (default 1)")
    p.add_argument("--tuning-log", metavar="FILE",
                   help="the cpu backend's schedules (codesign tune model MODEL --target cpu --log FILE)")
    p.add_argument("--cpu-watts", type=float, metavar="W",
                   help="power of the cores the CPU backends use: their energy per inference is estimated "
                        "as latency x W (labelled so; else not given)")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.add_argument("-o", "--output", metavar="DIR", help="write each model's figure (PNG, SVG) here")
    p.set_defaults(run=_run)


def _items(text: str, option: str) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    if not items:
        raise InputError(f"{option} {text!r} names nothing")
    return items


def _run(args: argparse.Namespace) -> int:
    from codesign.compare import CompareRequest, compare, write_figure
    from compiler.codegen.cpu import use_default_disk_cache

    backends = _items(args.backends, "--backends")
    precisions = _items(args.precision, "--precision") if args.precision is not None else ("fp32", "int8")
    if args.precision is not None and set(backends) == {"accel"}:
        raise InputError("--precision applies to the cpu and onnxruntime backends; the accelerator runs int8")
    if args.config and "accel" not in backends:
        raise InputError("--config applies to the accel backend, which --backends leaves out")
    requests = [CompareRequest(m, tuple(args.config) or ("vta",), backends, precisions, args.threads,
                               args.repeat, args.warmup, args.inputs, tuning_log=args.tuning_log,
                               cpu_watts=args.cpu_watts)
                for m in args.model]
    for r in requests:
        r.check()  # every bad option is refused before anything is compiled
    use_default_disk_cache()
    reports = []
    for r in requests:
        report = compare(r)
        reports.append(report)
        figures = write_figure(report, args.output) if args.output else []
        if not args.json:
            print_table(report)
            for f in figures:
                print(f"figure: {f}")
    if args.json:
        emit([r.to_json() for r in reports], True, indent=1)
    return 0


def print_table(report: CompareReport, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    fastest = min((r.latency.median_ms for r in report.results), default=0.0)
    print(f"{report.model}: {2 * report.macs / 1e9:.2f} GOP per inference, batch 1, "
          f"{report.threads} thread(s), {report.repeat} timed rounds", file=stream)
    head = (f"{'backend':22} {'timing':9} {'median ms':>9} {'p25-p75 ms':>15} {'x fastest':>9} {'inf/s':>8} "
            f"{'GOP/s':>7} {'% peak':>6} {'cosine':>8} {'top-1':>6} {'energy':>7}")
    print(head, file=stream)
    for r in report.results:
        lat = r.latency
        top1 = "" if r.top1_agreement is None else f"{r.top1_agreement:.2f}"
        energy = "n/a" if r.energy_mj is None else f"{r.energy_mj:.3f}"
        cosine = "" if r.cosine is None else f"{r.cosine:.5f}"
        print(f"{r.backend:22} {r.timing:9} {lat.median_ms:9.3f} {lat.p25_ms:7.2f}-{lat.p75_ms:<7.2f} "
              f"{lat.median_ms / fastest:9.2f} {r.throughput_per_s:8.1f} {r.gops:7.1f} "
              f"{100 * r.peak_fraction:6.1f} {cosine:>8} {top1:>6} {energy:>7}", file=stream)
    for r in report.results:
        print(f"peak {r.backend}: {r.peak_gops:.1f} GOP/s ({r.peak_source})", file=stream)
    for r in report.results:
        if r.energy_source:
            print(f"energy {r.backend}: {r.energy_mj:.3f} mJ ({r.energy_source})", file=stream)
    from codesign.compare.records import FAITHFUL_COSINE

    for r in report.results:
        if not r.faithful:
            print(f"warning: {r.backend}'s outputs are off (cosine {r.cosine:.3f} against onnxruntime fp32, "
                  f"below {FAITHFUL_COSINE}): its latency is not comparable, and it is not ranked",
                  file=stream)
    print(f"fastest: {report.fastest or 'none with faithful outputs'}", file=stream)
