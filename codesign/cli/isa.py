"""`codesign isa dump PROGRAM [--config X]`: one line per instruction with token occupancy."""

from __future__ import annotations

import argparse

from codesign.cli.args import config_for, load_program
from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("isa", help="instruction streams").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    dump = group.add_parser("dump", help="print a program's instructions")
    dump.add_argument("program", help="a program file (.npz)")
    dump.add_argument("--config", default=None,
                      help="preset or JSON file (default: the preset the program names)")
    dump.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    dump.set_defaults(run=_dump)


def dump_lines(program: Program, cfg: AcceleratorConfig) -> list[str]:
    """The dump: instruction, module and the four token queues' running counts."""
    counts = [0] * len(isa.Queue)
    header = " ".join(f"{q.short:>4}" for q in isa.Queue)
    lines = [f"# {len(program.insns)} instructions for {cfg.name} ({program.fingerprint})",
             f"{'#':>5} {'module':<8} {header}  instruction"]
    for index, insn in enumerate(program.decoded(cfg)):
        pops, pushes = isa.token_queues(insn)
        for q in pops:
            counts[q] -= 1
        for q in pushes:
            counts[q] += 1
        occupancy = " ".join(f"{c:>4}" for c in counts)
        module = isa.module_of(insn).name.lower()
        lines.append(f"{index:>5} {module:<8} {occupancy}  {isa.format_insn(insn)}")
    return lines


def _dump(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    cfg = config_for(program, args.config, args.set)
    print("\n".join(dump_lines(program, cfg)))
    return 0
