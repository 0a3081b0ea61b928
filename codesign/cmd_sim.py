"""`codesign sim selftest --backend B [--config X] [--json]`: the ISA conformance suite."""

from __future__ import annotations

import argparse
import json

from codesign.cli import add_config_args
from hw.config import resolve
from sim.backends import NAMES, make_backend
from sim.conformance import run_suite


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("sim", help="simulators").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    selftest = group.add_parser("selftest", help="run the ISA conformance suite on a backend")
    selftest.add_argument("--backend", choices=NAMES, default="fsim")
    add_config_args(selftest)
    selftest.add_argument("--seed", type=int, default=None,
                          help="fsim: run a random legal interleaving with this seed")  # fmt: skip
    selftest.add_argument("--json", action="store_true")
    selftest.set_defaults(run=_selftest)


def _selftest(args: argparse.Namespace) -> int:
    cfg = resolve(args.config, args.set)
    options = {"seed": args.seed} if args.backend == "fsim" else {}
    report = run_suite(make_backend(args.backend, cfg, **options))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for r in report.results:
            print(f"{'PASS' if r.passed else 'FAIL'}  {r.name}{'  ' + r.detail if r.detail else ''}")
        print(f"{report.backend} on {report.config}: {report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0
