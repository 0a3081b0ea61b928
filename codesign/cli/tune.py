"""`codesign tune op conv2d|dense`: search an operator's schedule space with the learned cost
model (or random/grid search), measuring on the timing model (or rtl), logging every trial.

`codesign tune model MODEL.onnx` tunes every accelerator operator of a model; with `--target
cpu`, every convolution of the model on our CPU target instead (compiler.tune.cpu: each
register tile of its space measured on this host, the default kept unless beaten), within
`--budget` seconds, writing the CPU tuning log that `codesign compile|run|compare
--tuning-log` read back.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codesign.cli.args import add_config_args
from codesign.cli.operators import add_operator_parsers
from codesign.cli.output import emit
from codesign.tune.explore import METHODS
from compiler.tune.space import MAX_INSNS
from hw.config import resolve
from hw.errors import InputError

if TYPE_CHECKING:  # the tuner is imported when it runs, not when the CLI starts
    from codesign.tune.measure import Measurer
    from codesign.tune.records import Measurement


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("tune", help="schedule search with a learned cost model").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    ops = group.add_parser("op", help="tune one operator")
    ops = ops.add_subparsers(dest="op", required=True, metavar="OP")  # type: ignore[assignment]
    add_operator_parsers(ops, _common, _run)
    model = group.add_parser("model", help="tune every accelerator operator of a model")
    model.add_argument("model", metavar="MODEL.onnx")
    _common(model)
    model.add_argument("--input-shape", action="append", default=[], metavar="NAME=1,3,224,224")
    model.add_argument("--offload-shallow", action="store_true",
                       help="tune shallow convolutions too (for codesign run --offload-shallow)")
    model.add_argument("--target", choices=("accel", "cpu"), default="accel",
                       help="accel (default: its operators on the timing model) or cpu (its "
                            "convolutions on our CPU target, measured on this host; needs --log)")
    model.add_argument("--precision", choices=("fp32", "int8"), default=None,
                       help="--target cpu: the model's precision (default fp32)")
    model.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                       help="--target cpu: start no convolution's search after this many seconds "
                            "(the rest keep their defaults; default: no limit)")
    model.add_argument("--repeat", type=int, default=5,
                       help="--target cpu: runs per measurement, the fastest kept (default 5)")
    model.set_defaults(run=_run_model)


def _common(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--trials", type=int, default=64, help="trials in all, the log's included (default 64)")
    p.add_argument("--batch", type=int, default=4, help="points measured per round (default 4)")
    p.add_argument("--method", choices=METHODS, default="model", help="search (default model)")
    p.add_argument("--backend", choices=("timing", "rtl"), default="timing",
                   help="measure on (default timing)")
    p.add_argument("--log", metavar="FILE", help="append every trial to this JSON-lines log; resume from it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="measuring processes (0: in this one)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one trial may take (default 120)")
    p.add_argument("--max-insns", type=int, default=MAX_INSNS,
                   help=f"leave out points issuing more instructions (default {MAX_INSNS})")
    p.add_argument("--no-cache", action="store_true", help="measure every point, even ones measured before")
    p.add_argument("--json", action="store_true")


def _check(args: argparse.Namespace) -> None:
    for flag, value, low in (("--trials", args.trials, 1), ("--batch", args.batch, 1),
                             ("--workers", args.workers, 0), ("--max-insns", args.max_insns, 1)):
        if value < low:
            raise InputError(f"{flag} must be at least {low}, not {value}")
    if not args.timeout > 0:
        raise InputError(f"--timeout must be positive, not {args.timeout}")


def _run(args: argparse.Namespace) -> int:
    from codesign.exec.progress import Bar
    from codesign.exec.store import Store
    from codesign.tune import log
    from codesign.tune.measure import Measurer
    from codesign.tune.report import tune_report
    from codesign.tune.tuner import tune
    from compiler.target import AcceleratorTarget
    from compiler.tune.space import build_space

    _check(args)
    resume = log.read(args.log) if args.log and _exists(args.log) else []
    cfg = resolve(args.config, args.set)
    op = args.make(args, AcceleratorTarget(cfg))
    bar = Bar()
    store = None if args.no_cache else Store()
    space = build_space(op, max_insns=args.max_insns, cache=store,
                        progress=lambda d, t: bar.update("features", d, t))
    measurer = Measurer(store=store, workers=args.workers, timeout_s=args.timeout)
    try:
        result = tune(space, cfg, measurer, trials=args.trials, method=args.method, batch=args.batch,
                      seed=args.seed, backend=args.backend, log_path=args.log, resume=resume,
                      progress=lambda d, t, b: bar.update("tune", d, t, f"best {b}"))
        default = _measure_default(space, cfg, op, measurer, args)
    finally:
        measurer.close()
    report = tune_report(result, default, config=cfg.name, backend=args.backend, log=args.log)
    emit(report.to_json(), args.json)
    return 0 if report.best_cycles is not None else 1


def _run_model(args: argparse.Namespace) -> int:
    """Tune each distinct accelerator operator of the model (as `codesign run` compiles it) and
    log every trial; `codesign run --tuning-log` then uses the best schedules."""
    from codesign.cli.args import input_shapes
    from codesign.exec.progress import Bar
    from codesign.exec.store import Store
    from codesign.run.model import load_model
    from codesign.tune import log
    from codesign.tune.measure import Measurer
    from codesign.tune.report import OperatorTuneRow, model_tune_report
    from codesign.tune.tuner import tune
    from compiler.tune.space import build_space

    if args.target == "cpu":
        return _run_cpu_model(args)
    for option in ("precision", "budget"):
        if getattr(args, option) is not None:
            raise InputError(f"--{option} applies to --target cpu")
    _check(args)
    cfg = resolve(args.config, args.set)
    loaded = load_model(args.model, cfg, input_shapes(args.input_shape) or None,
                        offload_shallow=args.offload_shallow)
    resume = log.read(args.log) if args.log and _exists(args.log) else []
    store = None if args.no_cache else Store()
    measurer = Measurer(store=store, workers=args.workers, timeout_s=args.timeout)
    rows: dict[str, OperatorTuneRow] = {}  # by the operator's description: one search each
    bar = Bar()
    try:
        for step in loaded.model.steps:
            op = step.accel.op if step.accel is not None else None
            if op is None or op.op not in ("conv2d", "dense"):
                continue
            key = json.dumps(op.describe(), sort_keys=True)
            if key in rows:
                rows[key] = dataclasses.replace(rows[key], steps=(*rows[key].steps, step.node.name))
                continue
            space = build_space(op, max_insns=args.max_insns, cache=store)
            name = step.node.name

            def progress(done: int, total: int, best: Any, name: str = name) -> None:
                bar.update(name, done, total, f"best {best}")

            result = tune(space, cfg, measurer, trials=args.trials, method=args.method, batch=args.batch,
                          seed=args.seed, backend=args.backend, log_path=args.log, resume=resume,
                          progress=progress)
            default = _measure_default(space, cfg, op, measurer, args)
            rows[key] = OperatorTuneRow(op=op.op, steps=(step.node.name,), space_points=len(space),
                                        trials=len(result.order), default_cycles=default.cycles,
                                        best_cycles=result.best_cycles)
    finally:
        measurer.close()
    report = model_tune_report(list(rows.values()), model=args.model, config=cfg.name, backend=args.backend,
                               log=args.log)
    emit(report.to_json(), args.json)
    return 0


def _measure_default(space: Any, cfg: Any, op: Any, measurer: Measurer,
                     args: argparse.Namespace) -> Measurement:
    """The default schedule, measured as a reference and logged (method 'default'), so the log's
    best is never slower than the default."""
    from codesign.tune import log
    from codesign.tune.measure import task_for

    task = task_for(space.workload, cfg, op.default_knobs(), args.backend)
    (_, default, cached), = list(measurer.run([task]))
    if args.log:
        log.append(args.log, [log.record(space.workload, cfg, args.backend, task.knobs, default,
                                         method="default", trial=0, cached=cached)])
    return default


def _exists(path: str) -> bool:
    return Path(path).exists()



# -- the CPU target ------------------------------------------------------------------------------
def _run_cpu_model(args: argparse.Namespace) -> int:
    """Tune every distinct convolution of the model's CPU target (threads 1, as the tuned table
    is keyed by the unsplit operator) and write the CPU tuning log."""
    import time

    from codesign.cli.args import input_shapes
    from codesign.exec.progress import Bar
    from codesign.run.host import load_cpu
    from compiler.codegen.cpu import use_default_disk_cache
    from compiler.tune.cpu import conv_macs, spec_key, tune_model, write_log

    if not args.log:
        raise InputError("--target cpu needs --log FILE: the tuning log that codesign compile|run|compare "
                         "--tuning-log read back")
    if args.budget is not None and not args.budget > 0:
        raise InputError(f"--budget must be positive, not {args.budget}")
    if args.repeat < 1:
        raise InputError(f"--repeat must be at least 1, not {args.repeat}")
    precision = args.precision or "fp32"
    use_default_disk_cache()
    start = time.perf_counter()
    model, _, _, _ = load_cpu(args.model, precision, 1, resolve(args.config, args.set),
                              input_shapes(args.input_shape) or None)
    specs = [s.specs[0] for s in model.steps if s.where == "host"]
    bar = Bar()
    results = tune_model(specs, args.repeat, lambda d, t: bar.update("convolutions", d, t), args.budget)
    write_log(args.log, results, model=args.model, precision=precision)
    uses: dict[str, int] = {}
    for name, params in specs:
        uses[spec_key(name, params)] = uses.get(spec_key(name, params), 0) + 1
    rows = [{**r.to_json(), "steps": uses[spec_key(r.name, r.params)],
             "gmacs": conv_macs(_conv_op(r.name, r.params)) / 1e9} for r in results]
    default_s = sum(r["default_s"] * r["steps"] for r in rows)
    best_s = sum(r["best_s"] * r["steps"] for r in rows)
    emit({"model": args.model, "target": "cpu", "precision": precision, "convolutions": len(rows),
          "untuned": len({spec_key(*s) for s in specs if s[0] in ("conv2d", "qconv2d")}) - len(rows),
          "trials": sum(r["trials"] for r in rows), "improved": sum(bool(r["best"]) for r in rows),
          "default_conv_ms": default_s * 1e3, "tuned_conv_ms": best_s * 1e3,
          "tune_s": time.perf_counter() - start, "log": args.log,
          "operators": [{k: r[k] for k in ("op", "best", "default_s", "best_s", "trials", "steps")}
                        for r in rows]},
         args.json, keys=None if args.json else ["model", "precision", "convolutions", "untuned", "trials",
                                                  "improved", "default_conv_ms", "tuned_conv_ms", "tune_s",
                                                  "log"])
    return 0


def _conv_op(name: str, params: dict[str, Any]) -> Any:
    from compiler.ops.cpu import host_op

    return host_op(name, **params)
