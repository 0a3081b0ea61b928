"""The `codesign` command: one console script with subcommands.

Each command group lives in its own module of this package with a `register(subparsers)`
function; options several commands share are in `codesign.cli.args`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from hw.errors import WorkbenchError, WorkbenchWarning
from hw.verilog import ToolchainError

# What the user can correct, reported in one line with exit status 2: the workbench's own errors
# (bad input, named in the message), an external tool that failed, and a file that is missing or
# cannot be opened. Anything else is a bug: its traceback is shown (exit status 1).
USER_ERRORS = (WorkbenchError, ToolchainError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
               PermissionError)


def build_parser() -> argparse.ArgumentParser:
    from codesign.cli import bench, compare, config, isa, models, op, report, run, sim, sweep, tune

    parser = argparse.ArgumentParser(
        prog="codesign", description="Hardware-software co-design workbench."
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a user error too (bugs always show theirs)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (config, isa, sim, op, bench, models, run, tune, sweep, report, compare):
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
    with warnings.catch_warnings():
        warnings.showwarning = _one_line(args.command, warnings.showwarning)
        return _run(args)


def _one_line(command: str, default: Any) -> Any:
    """A showwarning that prints the workbench's warnings as one line (others as Python does)."""
    def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
        if issubclass(category, WorkbenchWarning):
            print(f"codesign {command}: warning: {message}", file=sys.stderr)
        else:
            default(message, category, *rest, **kw)
    return show


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args) or 0)
    except USER_ERRORS as exc:
        if args.debug:
            raise
        print(f"codesign {args.command}: error: {exc}", file=sys.stderr)
        return 2

