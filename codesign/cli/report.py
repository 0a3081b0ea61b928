"""`codesign report STORE -o DIR`: a sweep's figures and page, from its store."""

from __future__ import annotations

import argparse
from typing import Any

from codesign.cli.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="figures and a page of a sweep's store: Pareto fronts, layers, "
                       "roofline")
    p.add_argument("store", metavar="STORE.db", help="the store `codesign sweep --store` wrote")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="where the figures and pages go")
    p.add_argument("--top", type=int, default=5, help="best designs listed (default 5)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from codesign.report.build import build_report  # matplotlib: imported by this command only

    summary = build_report(args.store, args.output, top=args.top)
    data = summary.to_json()
    if not args.json:
        lines: dict[str, Any] = {k: data[k] for k in ("store", "directory", "evaluated", "on_front")}
        lines["page"] = f"{args.output}/index.html"
        lines.update({f"best[{i}]": " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                                             for k, v in b.items()) for i, b in enumerate(data["best"])})
        data = lines
    emit(data, args.json)
    return 0
