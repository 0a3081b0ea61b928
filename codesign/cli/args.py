"""Options and argument parsing that several commands share."""

from __future__ import annotations

import argparse

from hw.errors import InputError


def add_config_args(parser: argparse.ArgumentParser) -> None:
    """--config PRESET|FILE and repeated --set key=value, shared by every command."""
    parser.add_argument("--config", default="vta", help="preset name or JSON file (default vta)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one parameter (repeatable)")


def input_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not name or not shape or any(d < 1 for d in shape):
            raise InputError(f"--input-shape {item!r} must be NAME=D1,D2,... with positive integers")
        shapes[name] = shape
    return shapes


def patterns(items: list[str]) -> tuple[str, ...]:
    return tuple(p for item in items for p in item.split(",") if p)
