"""The `codesign` command: one console script with subcommands.

Each command group lives in its own module of this package with a `register(subparsers)`
function; options several commands share are in `codesign.cli.args`.
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
    from codesign.cli import bench, config, isa, models, op, run, sim, tune

    parser = argparse.ArgumentParser(
        prog="codesign", description="Hardware-software co-design workbench."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (config, isa, sim, op, bench, models, run, tune):
        module.register(sub)
    try:
        hw_commands = importlib.import_module("codesign.cli.hw")
    except ImportError:  # the hardware tool group is optional
        pass
    else:
        hw_commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except USER_ERRORS as exc:
        print(f"codesign {args.command}: error: {exc}", file=sys.stderr)
        return 2

