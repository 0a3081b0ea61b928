"""`codesign hw verilog|area`: the generated Verilog and its area."""

from __future__ import annotations

import argparse
import shutil
import sys

from codesign.cli.args import add_config_args
from codesign.cli.output import emit
from hw.config import resolve


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("hw", help="generated hardware: Verilog, area").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    verilog = group.add_parser("verilog", help="write the Verilog of the accelerator (cached)")
    add_config_args(verilog)
    verilog.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    verilog.set_defaults(run=_verilog)
    area = group.add_parser("area", help="Yosys area: generic gates, Xilinx LUT/FF/DSP/BRAM, SRAM")
    add_config_args(area)
    area.add_argument("--effort", choices=("fast", "full"), default="fast",
                      help="generic-gate mapping: fast (ABC strash;map) or full (ABC's default "
                           "script; much slower on large configs)")
    area.add_argument("--json", action="store_true", help="print JSON")
    area.set_defaults(run=_area)


def _verilog(args: argparse.Namespace) -> int:
    from hw.verilog import verilog_for

    path = verilog_for(resolve(args.config, args.set))
    if args.output:
        shutil.copyfile(path, args.output)
    else:
        sys.stdout.write(path.read_text())
    return 0


def _area(args: argparse.Namespace) -> int:
    from hw.area import area_for

    report = area_for(resolve(args.config, args.set), effort=args.effort).to_json()
    emit(report, args.json, aligned=True)
    return 0
