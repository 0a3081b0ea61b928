"""`codesign sim selftest|run`: the ISA conformance suite, and running a saved Program."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from codesign.cli.args import add_config_args, check_figure_path, config_for, load_program
from hw.config import resolve
from hw.npz import read_npz
from hw.program import Program, ProgramError
from sim.backends import NAMES, capabilities, having, make_backend, make_tracing_backend

if TYPE_CHECKING:  # the suite and the traces are imported when a command runs, not when the CLI starts
    from sim.trace import Activity


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("sim", help="simulators").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    selftest = group.add_parser("selftest", help="run the ISA conformance suite on a backend")
    selftest.add_argument("--backend", choices=NAMES, default="fsim")
    add_config_args(selftest)
    selftest.add_argument("--seed", type=int, default=None,
                          help="fsim: run a random legal interleaving with this seed")
    selftest.add_argument("--json", action="store_true")
    selftest.set_defaults(run=_selftest)
    run = group.add_parser("run", help="run a program file; print its counters")
    run.add_argument("program", help="a program file (.npz)")
    run.add_argument("--backend", choices=NAMES, default="fsim")
    run.add_argument("--config", default=None, help="preset or JSON file (default: the program's)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--inputs", help=".npz with one array per input region")
    source.add_argument("--random-inputs", type=int, metavar="SEED", help="random input data")
    run.add_argument("--outputs", help="write the output regions to this .npz")
    run.add_argument("--vcd", help="rtl: also write a waveform of the run (signal-level mode)")
    run.add_argument("--trace", metavar="FILE.json",
                     help="timing/rtl: write a Chrome/Perfetto trace of every module's activity")
    run.add_argument("--timeline", metavar="FILE.png",
                     help="timing/rtl: draw the load/compute/store modules' activity over cycles "
                          "(.png, .svg or .pdf)")
    run.add_argument("--json", action="store_true")
    run.set_defaults(run=_run)


def _selftest(args: argparse.Namespace) -> int:
    cfg = resolve(args.config, args.set)
    can = capabilities(args.backend)
    options = {"seed": args.seed} if can.seeded else {}
    backend = make_backend(args.backend, cfg, **options)
    if not can.values:  # the ISA suite checks values; a model of time alone has its own suite
        from sim.timing.selftest import run_timing_suite

        report = run_timing_suite(backend)
    else:
        from sim import conformance

        report = conformance.run_suite(backend)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for r in report.results:
            print(f"{'PASS' if r.passed else 'FAIL'}  {r.name}{'  ' + r.detail if r.detail else ''}")
        print(f"{report.backend} on {report.config}: {report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


def random_inputs(program: Program, seed: int) -> dict[str, np.ndarray]:
    """Uniform random data over each input region's whole integer range."""
    rng = np.random.default_rng(seed)
    out = {}
    for r in program.regions_with_role("input"):
        info = np.iinfo(np.dtype(r.dtype))
        out[r.name] = rng.integers(info.min, info.max, r.shape, endpoint=True).astype(r.dtype)
    return out


def _inputs(args: argparse.Namespace, program: Program) -> dict[str, np.ndarray]:
    if args.random_inputs is not None:
        return random_inputs(program, args.random_inputs)
    if args.inputs is None:
        if program.regions_with_role("input") and capabilities(args.backend).values:
            raise ProgramError("the program has input regions: pass --inputs or --random-inputs")
        return {}
    if not Path(args.inputs).is_file():
        raise ProgramError(f"{args.inputs}: no such inputs file")
    return read_npz(args.inputs, error=ProgramError, what="an npz file of inputs")  # no pickles


def _timeline(activity: Activity, program: str, config: str, path: str) -> None:
    from codesign.plots import save_as, timeline_figure

    save_as(timeline_figure([(f"{program} on {config}", activity)]), path)


def _run(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    cfg = config_for(program, args.config, args.set)
    can = capabilities(args.backend)
    if args.vcd and not can.signals:
        raise ProgramError(f"--vcd needs --backend {' or '.join(having('signals'))}")
    traced = [f"--{flag}" for flag in ("trace", "timeline") if getattr(args, flag)]
    if traced and not can.traces:
        raise ProgramError(f"{traced[0]} needs --backend {' or '.join(having('traces'))} "
                           "(fsim has no notion of time)")
    if args.vcd and traced:
        raise ProgramError(f"--vcd and {traced[0]} are separate runs: give one of them")
    if args.timeline:
        check_figure_path(args.timeline, "--timeline")
    inputs = _inputs(args, program)
    if args.vcd:
        from sim.rtl.signal import run_with_vcd

        result = run_with_vcd(cfg, program, inputs, args.vcd)
    elif traced:
        result, activity = make_tracing_backend(args.backend, cfg).run_traced(program, inputs)
        if args.trace:
            activity.write(args.trace)
        if args.timeline:
            _timeline(activity, Path(args.program).name, cfg.name, args.timeline)
    else:
        result = make_backend(args.backend, cfg).run(program, inputs)
    if args.outputs:
        np.savez(args.outputs, **result.outputs)  # type: ignore[arg-type]
    stats = result.stats.to_dict()
    if args.json:
        print(json.dumps({"backend": args.backend, "config": cfg.name, "stats": stats}))
    else:
        for key, value in stats.items():
            print(f"{key}: {value}")
    return 0
