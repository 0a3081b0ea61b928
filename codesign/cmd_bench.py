"""`codesign bench fsim|cosim [--json]`: benchmarks that print JSON."""

from __future__ import annotations

import argparse
import importlib
import json

from codesign.cli import add_config_args
from hw.config import resolve


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("bench", help="benchmarks").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    fsim = group.add_parser("fsim", help="functional simulator speed on a large blocked GEMM")
    add_config_args(fsim)
    fsim.add_argument("--repeats", type=int, default=3)
    fsim.add_argument("--json", action="store_true")
    fsim.set_defaults(run=_fsim)
    cosim = group.add_parser("cosim", help="Verilator co-simulation speed")
    add_config_args(cosim)
    cosim.add_argument("--json", action="store_true")
    cosim.set_defaults(run=_cosim)
    layers = group.add_parser("layers", help="ResNet-18 convolutions: utilization, latency hiding")
    add_config_args(layers)
    layers.add_argument("--backend", default="rtl", help="fsim, rtl or timing (default rtl)")
    layers.add_argument("--layer", action="append", default=None, help="only this layer (repeatable)")
    layers.add_argument("--json", action="store_true")
    layers.set_defaults(run=_layers)


def _print(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


def _fsim(args: argparse.Namespace) -> int:
    from codesign import bench_fsim

    _print(bench_fsim.run(resolve(args.config, args.set), repeats=args.repeats), args.json)
    return 0


def _cosim(args: argparse.Namespace) -> int:
    bench_cosim = importlib.import_module("codesign.bench_cosim")
    _print(bench_cosim.run(resolve(args.config, args.set)), args.json)
    return 0


def _layers(args: argparse.Namespace) -> int:
    from codesign import bench_layers

    result = bench_layers.run(resolve(args.config, args.set), args.backend, args.layer)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{'layer':<14}{'cycles':>10}{'gemm_uops':>11}{'util':>7}{'cycles_vt1':>12}")
        for r in result["layers"]:
            util = f"{r['utilization']:.3f}" if r["utilization"] is not None else "-"
            print(f"{r['name']:<14}{r['cycles'] or '-':>10}{r['gemm_uops']:>11}{util:>7}"
                  f"{r['cycles_vthreads1'] or '-':>12}")  # fmt: skip
        print(f"utilization {result['utilization']}, latency hiding gain {result['latency_hiding_gain']}")
    return 0 if result["correct"] else 1
