"""`codesign op conv2d|dense`: compile one operator, run it with seeded data, check it."""

from __future__ import annotations

import argparse

from codesign.cli.args import add_config_args
from codesign.cli.operators import add_operator_parsers, eltwise
from codesign.cli.output import emit
from compiler.target import AcceleratorTarget
from hw.config import resolve
from hw.errors import InputError
from sim.backends import NAMES, make_backend


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("op", help="compile and run one operator").add_subparsers(
        dest="action", required=True, metavar="OP"
    )
    add_operator_parsers(group, _common, _run)
    for kind, text in (("add", "clip((a*mult_a + b*mult_b) >> shift) of two int8 tensors (residual)"),
                       ("clip", "clip((a*mult_a) >> shift) of one int8 tensor (ReLU: --low 0)")):
        p = group.add_parser(kind, help=text)
        p.add_argument("--shape", required=True, metavar="N,C,H,W")
        p.add_argument("--low", type=int, default=-128)
        p.add_argument("--high", type=int, default=127)
        p.add_argument("--mult-a", type=int, default=1)
        if kind == "add":
            p.add_argument("--mult-b", type=int, default=1)
        p.add_argument("--requant-shift", type=int, default=0, help="rounding right shift after the sum")
        _common(p)
        p.set_defaults(run=_run, make=eltwise)


def _common(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--backend", choices=NAMES, default="fsim")
    p.add_argument("--vthreads", default="auto", help="auto, or a virtual-thread count")
    p.add_argument("--schedule", help="a schedule file (JSON with 'records' or 'knobs')")
    p.add_argument("--tuning-log", metavar="FILE",
                   help="use the fastest schedule in this tuning log (codesign tune) for this operator and "
                        "config; the default schedule when it has none")
    p.add_argument("--save-schedule", help="write the schedule used to this file")
    p.add_argument("--print-ir", action="store_true", help="print the final loop IR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")


def _vthreads(text: str) -> int | None:
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"--vthreads must be auto or a positive integer, not {text!r}")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    from codesign.run.op import compile_and_run

    cfg = resolve(args.config, args.set)
    op = args.make(args, AcceleratorTarget(cfg))
    backend = make_backend(args.backend, cfg)
    compiled, result = compile_and_run(op, backend, schedule=args.schedule, vthreads=_vthreads(args.vthreads),
                                       seed=args.seed, tuning_log=args.tuning_log)
    if args.save_schedule:
        compiled.schedule.save(args.save_schedule)
    if args.print_ir:
        print(compiled.built.print_ir())
    emit(result.to_json(), args.json, keys=("op", "config", "backend", "correct", "cycles", "gemm_uops",
                                            "utilization", "instructions", "dram_bytes_read", "compile_s"))
    if not args.json:
        print("schedule:\n  " + str(compiled.schedule).replace("\n", "\n  "))
    return 1 if result.correct is False else 0
