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
