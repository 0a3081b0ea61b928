"""The operator arguments `codesign op` and `codesign tune op` share: conv2d and dense with their
shapes and epilogue, and the operator each command line describes."""

from __future__ import annotations

import argparse
from collections.abc import Callable

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
from hw.errors import InputError


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


def _epilogue(args: argparse.Namespace) -> Epilogue:
    return Epilogue(bias=not args.no_bias, multiplier=args.multiplier, shift=args.shift,
                    clip=(-128, 127) if args.no_relu else (0, 127),
                    channel_multiplier=args.channel_multiplier, round=args.round)


def _conv(args: argparse.Namespace, target: AcceleratorTarget) -> AccelOperator:
    n, c, h, w = _four(args.shape, "--in")
    spec = Conv2dSpec(n, c, h, w, args.out_channels, args.kernel, args.stride, args.pad, _epilogue(args))
    return Conv2d(spec, target)


def eltwise(args: argparse.Namespace, target: AcceleratorTarget) -> AccelOperator:
    n, c, h, w = _four(args.shape, "--shape")
    return Eltwise(EltwiseSpec(args.action, n, c, h, w, (args.low, args.high), args.mult_a,
                               getattr(args, "mult_b", 1), args.requant_shift), target)


def _four(text: str, flag: str) -> tuple[int, int, int, int]:
    try:
        n, c, h, w = (int(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"{flag} {text!r} must be four integers N,C,H,W") from None
    return n, c, h, w


def _dense(args: argparse.Namespace, target: AcceleratorTarget) -> AccelOperator:
    return Dense(DenseSpec(args.m, args.k, args.n, _epilogue(args)), target)
