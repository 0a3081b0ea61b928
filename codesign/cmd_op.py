"""`codesign op conv2d|dense`: compile one operator, run it with seeded data, check it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from codesign.cli import add_config_args
from codesign.op_run import compile_and_run
from compiler.ops.accel import (
    AccelOperator,
    Conv2d,
    Conv2dSpec,
    Dense,
    DenseSpec,
    Eltwise,
    EltwiseSpec,
    Epilogue,
)
from compiler.target import AcceleratorTarget
from hw.config import resolve
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
        p.set_defaults(run=_run, make=_eltwise)


def add_operator_parsers(group: argparse._SubParsersAction,
                         common: Callable[[argparse.ArgumentParser], None],
                         run: Callable[[argparse.Namespace], int]) -> None:
    """The conv2d and dense subcommands with their shape and epilogue options; `common` adds
    the command's own options (shared by `codesign op` and `codesign tune op`)."""
    conv = group.add_parser("conv2d", help="packed int8 conv2d + epilogue")
    conv.add_argument("--in", dest="shape", required=True, metavar="N,C,H,W")
    conv.add_argument("--out-channels", type=int, required=True)
    conv.add_argument("--kernel", type=int, default=3)
    conv.add_argument("--stride", type=int, default=1)
    conv.add_argument("--pad", type=int, default=0)
    dense = group.add_parser("dense", help="packed int8 matmul + epilogue")
    dense.add_argument("--m", type=int, required=True)
    dense.add_argument("--k", type=int, required=True)
    dense.add_argument("--n", type=int, required=True)
    for p, make in ((conv, _conv), (dense, _dense)):
        common(p)
        add_epilogue_args(p)
        p.set_defaults(run=run, make=make)


def add_epilogue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--multiplier", type=int, default=None, help="one immediate multiplier (16 bits)")
    p.add_argument("--channel-multiplier", action="store_true",
                   help="a per-output-channel multiplier vector (an int32 input, as per-channel scales need)")
    p.add_argument("--round", action="store_true", help="round to nearest before the shift")
    p.add_argument("--shift", type=int, default=8)
    p.add_argument("--no-relu", action="store_true", help="clip to [-128, 127] instead of [0, 127]")


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


def _epilogue(args: argparse.Namespace) -> Epilogue:
    return Epilogue(bias=not args.no_bias, multiplier=args.multiplier, shift=args.shift,
                    clip=(-128, 127) if args.no_relu else (0, 127),
                    channel_multiplier=args.channel_multiplier, round=args.round)


def _conv(args: argparse.Namespace, target: AcceleratorTarget) -> AccelOperator:
    n, c, h, w = _four(args.shape, "--in")
    spec = Conv2dSpec(n, c, h, w, args.out_channels, args.kernel, args.stride, args.pad, _epilogue(args))
    return Conv2d(spec, target)


def _eltwise(args: argparse.Namespace, target: AcceleratorTarget) -> AccelOperator:
    n, c, h, w = _four(args.shape, "--shape")
    return Eltwise(EltwiseSpec(args.action, n, c, h, w, (args.low, args.high), args.mult_a,
                               getattr(args, "mult_b", 1), args.requant_shift), target)


def _four(text: str, flag: str) -> tuple[int, int, int, int]:
    try:
        n, c, h, w = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"{flag} {text!r} must be four integers N,C,H,W") from None
    return n, c, h, w


def _dense(args: argparse.Namespace, target: AcceleratorTarget) -> AccelOperator:
    return Dense(DenseSpec(args.m, args.k, args.n, _epilogue(args)), target)


def _vthreads(text: str) -> int | None:
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--vthreads must be auto or a positive integer, not {text!r}")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    cfg = resolve(args.config, args.set)
    op = args.make(args, AcceleratorTarget(cfg))
    backend = make_backend(args.backend, cfg)
    compiled, result = compile_and_run(op, backend, schedule=args.schedule, vthreads=_vthreads(args.vthreads),
                                       seed=args.seed, tuning_log=args.tuning_log)
    if args.save_schedule:
        compiled.schedule.save(args.save_schedule)
    if args.print_ir:
        print(compiled.built.print_ir())
    if args.json:
        print(json.dumps(result))
    else:
        for key in ("op", "config", "backend", "correct", "cycles", "gemm_uops", "utilization",
                    "instructions", "dram_bytes_read", "compile_s"):
            print(f"{key}: {result[key]}")
        print("schedule:\n  " + str(compiled.schedule).replace("\n", "\n  "))
    return 1 if result["correct"] is False else 0
