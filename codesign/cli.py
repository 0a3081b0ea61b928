"""The `codesign` command: one console script with subcommands.

Each command group lives in its own module with a `register(subparsers)` function.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from compiler.errors import ScheduleError, TensorExprError
from hw.config import ConfigError
from hw.isa import EncodingError
from hw.program import ProgramError
from hw.verilog import ToolchainError
from sim.backend import SimulationError

# Errors reported in one line with exit status 2: bad input, or an external tool that failed.
USER_ERRORS = (ConfigError, ProgramError, SimulationError, EncodingError, ScheduleError,
               TensorExprError, ValueError, OSError, ToolchainError)


def build_parser() -> argparse.ArgumentParser:
    from codesign import cmd_bench, cmd_config, cmd_isa, cmd_models, cmd_op, cmd_run, cmd_sim, cmd_tune

    parser = argparse.ArgumentParser(
        prog="codesign", description="Hardware-software co-design workbench."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (cmd_config, cmd_isa, cmd_sim, cmd_op, cmd_bench, cmd_models, cmd_run, cmd_tune):
        module.register(sub)
    try:
        cmd_hw = importlib.import_module("codesign.cmd_hw")
    except ImportError:  # the hardware tool group is optional
        pass
    else:
        cmd_hw.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except USER_ERRORS as exc:
        print(f"codesign {args.command}: error: {exc}", file=sys.stderr)
        return 2


def add_config_args(parser: argparse.ArgumentParser) -> None:
    """--config PRESET|FILE and repeated --set key=value, shared by every command."""
    parser.add_argument("--config", default="vta", help="preset name or JSON file (default vta)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one parameter (repeatable)")
