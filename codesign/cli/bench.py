"""`codesign bench fsim|cosim|...|sweep-search|sweep|gpu [--json]`: benchmarks that print JSON."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

from codesign.cli.args import add_config_args
from codesign.cli.output import emit, progress
from hw.config import resolve
from hw.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("bench", help="benchmarks").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    gpu = group.add_parser("gpu", help="the GPU target on a real GPU: models vs onnxruntime and PyTorch, "
                           "the largest ResNet-18 convolution vs peak (--offline: PTX + ptxas only)")
    gpu.add_argument("--models", default="resnet18,mobilenetv2,bert-tiny", metavar="M[,M...]")
    gpu.add_argument("--repeat", type=int, default=20)
    gpu.add_argument("--warmup", type=int, default=3)
    gpu.add_argument("--tune-points", type=int, default=24, metavar="N",
                     help="schedule points of the largest convolution timed on the device (default 24)")
    gpu.add_argument("--offline", action="store_true", help="no GPU: compile and assemble every kernel")
    gpu.add_argument("--arch", default="sm_80", help="the preset --offline compiles for (default sm_80)")
    gpu.add_argument("--json", action="store_true", help="(the output is always JSON)")
    gpu.set_defaults(run=_gpu)
    fsim = group.add_parser("fsim", help="functional simulator speed on a large blocked GEMM")
    add_config_args(fsim)
    fsim.add_argument("--repeats", type=int, default=3)
    fsim.add_argument("--json", action="store_true")
    fsim.set_defaults(run=_fsim)
    cosim = group.add_parser("cosim", help="Verilator co-simulation speed")
    add_config_args(cosim)
    cosim.add_argument("--json", action="store_true")
    cosim.set_defaults(run=_cosim)
    timing = group.add_parser("timing", help="timing model speed on the long blocked GEMM")
    add_config_args(timing)
    timing.add_argument("--repeats", type=int, default=5)
    timing.add_argument("--json", action="store_true")
    timing.set_defaults(run=_timing)
    fid = group.add_parser("fidelity", help="timing model vs RTL: cycles, errors, speed ratio")
    add_config_args(fid)
    fid.add_argument("--classes", default=None, metavar="A,B",
                     help="program classes to run (default all: conformance, random, gemm)")
    fid.add_argument("--random", type=int, default=200, metavar="N",
                     help="random differential programs (default 200)")
    fid.add_argument("--json", action="store_true")
    fid.set_defaults(run=_fidelity)
    layers = group.add_parser("layers", help="ResNet-18 convolutions: utilization, latency hiding")
    add_config_args(layers)
    layers.add_argument("--backend", default="rtl", help="fsim, rtl or timing (default rtl)")
    layers.add_argument("--layer", action="append", default=None, help="only this layer (repeatable)")
    layers.add_argument("--json", action="store_true")
    layers.set_defaults(run=_layers)
    tune = group.add_parser("tune", help="schedule search vs exhaustive enumeration on ResNet-18's layers")
    add_config_args(tune)
    tune.add_argument("--seeds", type=int, default=5, help="searches per layer and method (default 5)")
    tune.add_argument("--layer", action="append", default=None, help="only this layer (repeatable)")
    tune.add_argument("--workers", type=int, default=2, help="measuring processes (default 2)")
    tune.add_argument("--confirm", action="store_true",
                      help="also run each tuned schedule on fsim and rtl (exact? rtl cycles?)")
    tune.add_argument("--json", action="store_true")
    tune.set_defaults(run=_tune)
    sweep_eval = group.add_parser("sweep-eval", help="a sweep's evaluation of random points on ResNet-18")
    sweep_eval.add_argument("--points", type=int, default=20, help="hardware points (default 20)")
    sweep_eval.add_argument("--seed", type=int, default=0)
    sweep_eval.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    sweep_eval.add_argument("--warmup", type=int, default=0,
                            help="with --quality: points evaluated first, not checked")
    sweep_eval.add_argument("--window", type=float, default=1.6,
                            help="with --quality: measure points estimated within this factor of the best")
    sweep_eval.add_argument("--cap", type=int, default=64, help="with --quality: at most this many per layer")
    sweep_eval.add_argument("--best-cache", default=None,
                            help="with --quality: a JSON file keeping the exhaustive searches between runs")
    sweep_eval.add_argument("--measured", type=int, default=3,
                            help="candidates measured per operator beyond the default and best estimate")
    sweep_eval.add_argument("--quality", action="store_true",
                            help="compare each layer's chosen schedule with its space's exhaustive best")
    sweep_eval.add_argument("--json", action="store_true")
    sweep_eval.set_defaults(run=_sweep_eval)
    convs = group.add_parser("cpu-convs", help="each convolution on our CPU target and onnxruntime: "
                             "GFLOP/s and fraction of this host's measured peak")
    convs.add_argument("--model", default="resnet18", help="a zoo model (default resnet18)")
    convs.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    convs.add_argument("--rounds", type=int, default=10, help="timed runs of each (default 10)")
    convs.add_argument("--tuning-log", metavar="FILE", help="our schedules from a CPU tuning log")
    convs.add_argument("--ops", choices=("convs", "all"), default="convs",
                       help="all: every operator kind of both, besides the convolutions")
    convs.add_argument("--json", action="store_true")
    convs.set_defaults(run=_cpu_convs)
    search = group.add_parser("sweep-search", help="search strategies replayed against an exhaustive sweep")
    search.add_argument("--table", metavar="STORE.db", help="an exhaustive sweep's store (ground truth)")
    search.add_argument("--synthetic", metavar="SPACE", nargs="?", const="small", default=None,
                        help="build the table with the synthetic stand-in on SPACE (default small)")
    search.add_argument("--seeds", type=int, default=5, help="replays per strategy (default 5)")
    search.add_argument("--budget-fraction", type=float, default=0.1,
                        help="share of the table the default strategy may use (default 0.1)")
    search.add_argument("--strategies", default=None, metavar="A,B", help="default: all but grid")
    search.add_argument("--no-proxy", action="store_true",
                        help="replay without the compiler's estimates (codesign/sweep/proxy.py)")
    search.add_argument("--json", action="store_true")
    search.set_defaults(run=_sweep_search)
    sweep = group.add_parser("sweep", help="a sweep's throughput on an executor (local, Dask), Dask's costs")
    sweep.add_argument("--space", default="small", help="a space file or a packaged space (default small)")
    sweep.add_argument("--executor", default="local", metavar="local|dask|dask://HOST:PORT")
    sweep.add_argument("--security", metavar="FILE.toml", help="Dask TLS options (see codesign sweep)")
    sweep.add_argument("--workers", type=int, default=2, help="processes or LocalCluster workers (default 2)")
    sweep.add_argument("--budget", type=int, default=16, help="points of a random sweep (default 16)")
    sweep.add_argument("--seed", type=int, default=0)
    sweep.add_argument("--store", metavar="FILE.db", help="keep the store here (default: a temporary one)")
    sweep.add_argument("--against", metavar="STORE.db", help="compare the store with another run's")
    sweep.add_argument("--overhead", action="store_true",
                       help="Dask: also time a task's round trip and the scheduler's tasks per second")
    sweep.add_argument("--json", action="store_true")
    sweep.set_defaults(run=_sweep)
    area = group.add_parser("area-model", help="area model vs Yosys on held-out configs (logic GE)")
    area.add_argument("--json", action="store_true")
    area.set_defaults(run=_area_model)
    acc = group.add_parser("zoo-accuracy", help="int8 against fp32 (and labels) over many inputs per zoo "
                             "model")
    add_config_args(acc)
    acc.add_argument("--models", default="digits,efficientnet-lite1,mobilenetv2,resnet18",
                     help="comma-separated zoo models (default all four)")
    acc.add_argument("--inputs", type=int, default=400, metavar="N", help="inputs per model (default 400)")
    acc.add_argument("--json", action="store_true")
    acc.set_defaults(run=_zoo_accuracy)


def _gpu(args: argparse.Namespace) -> int:
    from codesign.bench import gpu

    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    if not models:
        raise InputError(f"--models {args.models!r} names nothing")
    report = gpu.gpu_check(models, args.repeat, args.warmup, args.tune_points, args.offline, args.arch)
    print(json.dumps(report, indent=1))
    return 0


def _fsim(args: argparse.Namespace) -> int:
    from codesign.bench import fsim as bench_fsim

    emit(bench_fsim.run(resolve(args.config, args.set), repeats=args.repeats).to_json(), args.json)
    return 0


def _cosim(args: argparse.Namespace) -> int:
    bench_cosim = importlib.import_module("codesign.bench.cosim")
    emit(bench_cosim.run(resolve(args.config, args.set)).to_json(), args.json)
    return 0


def _layers(args: argparse.Namespace) -> int:
    from codesign.bench import layers as bench_layers

    result = bench_layers.run(resolve(args.config, args.set), args.backend, args.layer)
    if args.json:
        emit(result.to_json(), True)
    else:
        print(f"{'layer':<14}{'cycles':>10}{'gemm_uops':>11}{'util':>7}{'cycles_vt1':>12}")
        for r in result.layers:
            util = f"{r.utilization:.3f}" if r.utilization is not None else "-"
            print(f"{r.name:<14}{r.cycles or '-':>10}{r.gemm_uops:>11}{util:>7}"
                  f"{r.cycles_vthreads1 or '-':>12}")
        print(f"utilization {result.utilization}, latency hiding gain {result.latency_hiding_gain}")
    return 0 if result.correct else 1


def _tune(args: argparse.Namespace) -> int:
    from codesign.bench import tune as bench
    from codesign.exec.progress import Bar
    from codesign.exec.store import Store
    from codesign.tune.measure import Measurer

    if args.seeds < 1:
        raise InputError(f"--seeds must be at least 1, not {args.seeds}")
    bar = Bar()
    measurer = Measurer(store=Store(), workers=args.workers)
    try:
        result = bench.run(resolve(args.config, args.set), measurer, seeds=args.seeds, layers=args.layer,
                           confirm=args.confirm, progress=bar.update)
    finally:
        measurer.close()
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(bench.table(result))
    return 0


def _sweep_eval(args: argparse.Namespace) -> int:
    from codesign.bench import sweep_eval, sweep_quality

    if args.quality:
        quality = sweep_quality.quality(args.points, args.seed, warmup=args.warmup, window=args.window,
                                        cap=args.cap, best_cache=args.best_cache)
        emit(quality.to_json(), args.json)
    else:
        speed = sweep_eval.run(args.points, args.seed, measured=args.measured, workers=args.workers)
        emit(speed.to_json(), args.json)
    return 0


def _cpu_convs(args: argparse.Namespace) -> int:
    from codesign import zoo
    from codesign.bench import cpu_convs
    from compiler.codegen.cpu import use_default_disk_cache

    if args.model not in zoo.names():
        raise InputError(f"--model {args.model!r} is no zoo model; known: {', '.join(zoo.names())}")
    if args.rounds < 1:
        raise InputError(f"--rounds must be at least 1, not {args.rounds}")
    use_default_disk_cache()
    report = cpu_convs.run(args.model, args.precision, args.rounds, args.tuning_log, ops=args.ops)
    print(json.dumps(report.to_json()) if args.json else cpu_convs.table(report))
    return 0


def _area_model(args: argparse.Namespace) -> int:
    from codesign.bench import area_model

    result = area_model.run()
    print(json.dumps(result.to_json()) if args.json else area_model.table(result))
    return 0


def _timing(args: argparse.Namespace) -> int:
    from codesign.bench import timing as bench_timing

    emit(bench_timing.run(resolve(args.config, args.set), repeats=args.repeats).to_json(), args.json)
    return 0


def _fidelity(args: argparse.Namespace) -> int:
    from codesign.bench import fidelity as bench_fidelity

    if args.random < 0:
        raise InputError(f"--random must be at least 0, not {args.random}")
    classes = args.classes.split(",") if args.classes else None
    cfg = resolve(args.config, args.set)
    report = bench_fidelity.run(cfg, classes=classes, random_count=args.random, progress=progress("fidelity"))
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(bench_fidelity.table(report))
    return 0


def _sweep(args: argparse.Namespace) -> int:
    import tempfile

    from codesign.bench import sweep_executor
    from codesign.sweep.engine import check_options
    from codesign.sweep.executor import check_reachable, parse_executor
    from codesign.sweep.space import load_space, resolve_space_path

    check_options(args.budget, args.workers, 600.0, None)
    spec = parse_executor(args.executor, args.security)
    check_reachable(spec)
    space = load_space(resolve_space_path(args.space))
    with tempfile.TemporaryDirectory() as folder:
        store = args.store or str(Path(folder) / "sweep.db")
        result = sweep_executor.run(space, store, spec, workers=args.workers, budget=args.budget,
                                    seed=args.seed, against=args.against, overhead=args.overhead)
    emit(result.to_json(), args.json)
    return 0


def _sweep_search(args: argparse.Namespace) -> int:
    from codesign.bench import sweep_search as bench
    from codesign.sweep.space import load_space, resolve_space_path

    if (args.table is None) == (args.synthetic is None):
        raise InputError("sweep-search needs one table: --table STORE.db or --synthetic [SPACE]")
    table = (bench.read_table(args.table) if args.table is not None
             else bench.synthetic_table(load_space(resolve_space_path(args.synthetic))))
    table = table if args.no_proxy else table.with_proxies()
    strategies = args.strategies.split(",") if args.strategies else None
    result = bench.run(table, strategies=strategies, seeds=args.seeds, budget_fraction=args.budget_fraction)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(bench.table_text(result))
    return 0


def _zoo_accuracy(args: argparse.Namespace) -> int:
    from codesign.bench import zoo_accuracy

    if args.inputs < 1:
        raise InputError(f"--inputs must be at least 1, not {args.inputs}")
    models = tuple(m for m in args.models.split(",") if m)
    report = zoo_accuracy.run(resolve(args.config, args.set), models, args.inputs, progress("zoo-accuracy"))
    emit(report.to_json(), True, indent=1)
    return 0
