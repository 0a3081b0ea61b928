"""Options and argument parsing that several commands share: the config, model input shapes,
layer patterns, and Program files with the config they run on."""

from __future__ import annotations

import argparse
from pathlib import Path

from hw.config import PRESETS, AcceleratorConfig, resolve
from hw.errors import InputError
from hw.program import Program, ProgramError


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


def config_for(program: Program, spec: str | None, overrides: list[str]) -> AcceleratorConfig:
    """The config a program runs on: `spec`, or the preset named in the program."""
    if spec is None and program.config_name in PRESETS:
        spec = program.config_name
    if spec is None:
        raise ProgramError(
            f"program was built for config {program.config_name!r}, which is not a preset; "
            "pass --config"
        )
    cfg = resolve(spec, overrides)
    program.check_config(cfg)
    return cfg


def load_program(path: str) -> Program:
    if not Path(path).is_file():
        raise ProgramError(f"{path}: no such program file")
    return Program.load(path)


FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def check_figure_path(path: str, flag: str) -> None:
    """A figure file an option names, refused before anything runs: its format comes from its
    suffix, and its folder must exist."""
    target = Path(path)
    if target.suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(f"{flag} {path}: a figure file ends in {', '.join(FIGURE_SUFFIXES)}")
    if not target.parent.is_dir():
        raise InputError(f"{flag} {path}: no such folder {target.parent}")
