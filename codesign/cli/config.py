"""`codesign config show [PRESET|FILE] [--set key=value ...] [--json]`."""

from __future__ import annotations

import argparse
import json

from hw.config import AcceleratorConfig, resolve


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("config", help="accelerator configurations").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    show = group.add_parser("show", help="print every parameter and derived value")
    show.add_argument("spec", nargs="?", default="vta", help="preset name or JSON file")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=_show)


def describe(cfg: AcceleratorConfig) -> dict[str, object]:
    """Parameters, derived values and the fingerprint, flat."""
    return {**cfg.to_dict(), **cfg.derived(), "fingerprint": cfg.fingerprint()}


def _show(args: argparse.Namespace) -> int:
    cfg = resolve(args.spec, args.set)
    info = describe(cfg)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    print(f"# accelerator config {cfg.name} ({cfg.fingerprint()})")
    for key, value in info.items():
        marker = "  (derived)" if key in cfg.derived() else ""
        print(f"{key:<{width}}  {value}{marker}")
    return 0
