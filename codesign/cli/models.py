"""`codesign models list [--json]` and `codesign models export NAME -o FILE.onnx [--seed N] [--opset N]`."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from codesign import zoo


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("models", help="the built-in model zoo").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    show = group.add_parser("list", help="the zoo's models, their inputs and opsets")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=_list)
    export = group.add_parser("export", help="write one model as an ONNX file")
    export.add_argument("name", help=f"one of {', '.join(zoo.names())}")
    export.add_argument("-o", "--output", required=True, metavar="FILE.onnx")
    export.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    export.add_argument("--opset", type=int, default=zoo.DEFAULT_OPSET,
                        help=f"ONNX opset (default {zoo.DEFAULT_OPSET}, up to {zoo.MAX_OPSET})")
    export.add_argument("--seq-len", type=int, default=None, help="sequence length (bert-tiny only)")
    export.add_argument("--json", action="store_true", help="print what was written as JSON")
    export.set_defaults(run=_export)
    photos = group.add_parser("photos", help="write real photos (crops and flips of the sample images of "
                              "installed packages) as PNG files: data for --calibration-data/--eval-data")
    photos.add_argument("folder")
    photos.add_argument("--count", type=int, default=64, help="how many crops (default 64)")
    photos.add_argument("--seed", type=int, default=0, help="crop seed (default 0)")
    photos.add_argument("--split", choices=("all", "calibration", "evaluation"), default="all",
                        help="every other photo (calibration), the others (evaluation), or all")
    photos.set_defaults(run=_photos)


def _list(args: argparse.Namespace) -> int:
    infos = [zoo.info(name) for name in zoo.names()]
    if args.json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return 0
    rows = [(i.name, f"{i.parameters:,}", f"{i.min_opset}-{zoo.MAX_OPSET}",
             ", ".join(f"{n} {d}[{','.join(map(str, s))}]" for n, d, s in i.inputs), i.summary)
            for i in infos]
    header = ("name", "parameters", "opsets", "inputs", "summary")
    widths = [max(len(row[col]) for row in [header, *rows]) for col in range(4)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)), row[4])
    return 0


def _photos(args: argparse.Namespace) -> int:
    from codesign.zoo.photos import write_photos

    if args.count < 1:
        raise zoo.ZooError(f"--count must be at least 1, not {args.count}")
    paths = write_photos(args.folder, args.count, args.seed, args.split)
    print(json.dumps({"folder": args.folder, "files": len(paths), "split": args.split, "seed": args.seed}))
    return 0


def _export(args: argparse.Namespace) -> int:
    options = {} if args.seq_len is None else {"seq_len": args.seq_len}
    start = time.perf_counter()
    model = zoo.build(args.name, args.seed, opset=args.opset, **options)
    data = model.SerializeToString()
    Path(args.output).write_bytes(data)
    report = {"name": args.name, "path": args.output, "bytes": len(data), "nodes": len(model.graph.node),
              "opset": args.opset, "ir_version": model.ir_version, "seed": args.seed,
              "seconds": round(time.perf_counter() - start, 3)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"wrote {args.output}: {args.name}, {len(data) / 1e6:.2f} MB, {report['nodes']} nodes, "
              f"opset {args.opset}, seed {args.seed}, {report['seconds']:.2f} s")
    return 0
