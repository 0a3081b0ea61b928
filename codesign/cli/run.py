"""`codesign compile` and `codesign run`: whole ONNX models on a candidate design."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import TYPE_CHECKING

from codesign.cli.args import add_config_args, check_figure_path, input_shapes, patterns
from codesign.cli.output import emit, progress
from codesign.run.host import HOST_BACKENDS
from compiler.driver import PRECISIONS
from hw.config import AcceleratorConfig, resolve
from hw.errors import InputError
from sim.backends import NAMES, capabilities, having, make_backend

COMPILE_GC_YOUNG = 50_000  # allocations between the collector's young passes while a model compiles

if TYPE_CHECKING:  # the model pipeline is imported when a command runs, not when the CLI starts
    from codesign.run.data import UserData
    from codesign.run.model import Loaded, ModelReport
    from compiler.driver import QuantOptions


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="compile (ONNX) and run a model; per-operator cycles and accuracy")
    run.add_argument("model", metavar="MODEL.onnx|MODEL.cmodel")
    add_config_args(run)
    run.add_argument("--backend", choices=(*NAMES, *HOST_BACKENDS), default="fsim",
                     help="a simulator of the accelerator, or a host backend: cpu (our own compiler's CPU "
                          "target), onnxruntime, or gpu (our own compiler's GPU target; needs an NVIDIA GPU)")
    _host_args(run)
    group = run.add_mutually_exclusive_group()
    group.add_argument("--inputs", type=int, default=1, metavar="N", help="N seeded inputs (default 1)")
    group.add_argument("--input-file", metavar="X.npz",
                       help="inputs: one array per model input, samples first (as --eval-data)")
    group.add_argument("--eval-data", metavar="X.npz|DIR",
                       help="evaluation samples: an .npz (samples first, or the model's batch axis split "
                            "into samples; a 'labels' array optional) or a folder of images (--preprocess)")
    _model_args(run)
    run.add_argument("--plot", metavar="FILE.png",
                     help="timing/rtl: draw each accelerator layer's cycles (GEMM busy, other compute, "
                          "stalls; load and store busy beside) to this figure (.png, .svg or .pdf)")
    _label_args(run)
    run.add_argument("--json", action="store_true")
    run.set_defaults(run=_run, config=None)  # a .cmodel carries its own config
    comp = sub.add_parser("compile", help="import, quantize and compile an ONNX model to one file")
    comp.add_argument("model", metavar="MODEL.onnx")
    comp.add_argument("-o", "--output", metavar="MODEL.cmodel", help="the compiled model (accel target)")
    comp.add_argument("--target", choices=("accel", "cpu"), default="accel",
                      help="accel (default; a .cmodel) or cpu (kernels compiled into the cache)")
    _host_args(comp)
    add_config_args(comp)
    _model_args(comp)
    comp.add_argument("--eval-data", metavar="X.npz|DIR", help="check evaluation samples against the model")
    _label_args(comp)
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(run=_compile)
    sens = sub.add_parser("sensitivity", help="the int8 error each layer costs: the model quantized with "
                          "each convolution or dense layer float in turn, against fp32")
    sens.add_argument("model", metavar="MODEL.onnx")
    add_config_args(sens)
    sens.add_argument("--inputs", type=int, default=20, metavar="N",
                      help="N seeded inputs, or the first N of --eval-data (default 20)")
    sens.add_argument("--eval-data", metavar="X.npz|DIR", help="evaluation samples (as codesign run's)")
    group = sens.add_mutually_exclusive_group()
    group.add_argument("--layers", action="append", default=[], metavar="PATTERN[,PATTERN...]",
                       help="only these layers (matched as --float-layers; default: all)")
    group.add_argument("--groups", nargs="+", default=[], metavar="PATTERN",
                       help="candidates of several layers: each pattern's layers float together "
                            "(e.g. 'features.1.*' 'features.2.*')")
    _quant_args(sens)
    _label_args(sens)
    sens.add_argument("--json", action="store_true")
    sens.set_defaults(run=_sensitivity)


def _host_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="the host backends' precision: fp32 (default) or int8 (the accelerator runs int8)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="threads of a host backend (default 1)")


def _host_options(args: argparse.Namespace, host: bool, what: str) -> tuple[str, int]:
    """The precision and thread count of a host backend; refused for the accelerator."""
    if not host:
        for option in ("precision", "threads"):
            if getattr(args, option) is not None:
                raise InputError(f"--{option} applies to {what}; the accelerator runs int8 on its simulator")
        return "int8", 1
    threads = 1 if args.threads is None else args.threads
    if threads < 1:
        raise InputError(f"--threads must be at least 1, not {threads}")
    return args.precision or "fp32", threads


def _model_args(p: argparse.ArgumentParser) -> None:
    _quant_args(p)
    p.add_argument("--tuning-log", metavar="FILE",
                   help="schedules from a tuning log (codesign tune) where it has the operator")


def _label_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--labels", metavar="FILE",
                   help="labels of --eval-data: one class per line in sample order, 'NAME LABEL' lines "
                        "for a folder's images, or a .npy; with them the report has top-1/top-5 accuracy")


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration-data", metavar="X.npz|DIR",
                   help="calibrate on these samples (an .npz or a folder of images, as --eval-data; "
                        "default: the zoo's own data, else seeded noise, with a warning)")
    p.add_argument("--preprocess", metavar="PRESET|FILE.toml",
                   help="how images become inputs: torchvision (default), tf-efficientnet-lite, "
                        "tf-mobilenet, unit, or a TOML file (preset, resize, crop, mean, std or scale, "
                        "offset, layout NCHW|NHWC, channels RGB|BGR)")
    p.add_argument("--preprocess-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one preprocessing key, e.g. resize=274 or mean=127 (repeatable)")


def _quant_args(p: argparse.ArgumentParser) -> None:
    _data_args(p)
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=1,3,224,224",
                   help="bind a model input's symbolic dimensions (repeatable)")
    p.add_argument("--calibration", default="percentile",
                   help="activation calibration: minmax, percentile, entropy or mse (a linear residual "
                        "stream, as MobileNetV2's, is calibrated by minmax whichever is chosen; a value "
                        "with per-channel scales by percentile instead of entropy)")
    p.add_argument("--calibration-inputs", type=int, default=None, metavar="N",
                   help="calibrate on N inputs (default 16; GPTQ's moments come from the first 16 "
                        "whatever N is; with 32, MobileNetV2's logit error is 11%% lower, ResNet-18's is "
                        "not, and ResNet-18's quantization takes 7.3 s instead of 4.2 s)")
    p.add_argument("--rounding", choices=("gptq", "gptq-all", "nearest"), default="gptq",
                   help="weight rounding: GPTQ from the calibration inputs' second moments for "
                        "convolutions (gptq, the default) or every dense layer (gptq-all), or nearest "
                        "(faster compiles, less accurate: see the README)")
    p.add_argument("--bias-correction", action=argparse.BooleanOptionalAction, default=True,
                   help="correct each convolution's bias for its mean int8 error on the calibration "
                        "inputs (default: on)")
    p.add_argument("--float-layers", action="append", default=[], metavar="PATTERN[,PATTERN...]",
                   help="keep the convolutions and dense layers whose ONNX node or output name "
                        "matches (fnmatch, e.g. 'features.1.*') float, on the host: fewer MACs "
                        "offloaded, less int8 error (repeatable)")
    p.add_argument("--offload-shallow", action="store_true",
                   help="run shallow convolutions (input channels at most half a block, e.g. an "
                        "image network's first layer) on the accelerator too, not on the host")


def _quant_options(args: argparse.Namespace) -> QuantOptions:
    from compiler.driver import CALIBRATION_COUNT, QuantOptions

    count = CALIBRATION_COUNT if args.calibration_inputs is None else args.calibration_inputs
    if count < 1:
        raise InputError(f"--calibration-inputs must be at least 1, not {count}")
    floats = patterns(args.float_layers)
    return QuantOptions(args.calibration, count, args.rounding, args.bias_correction, floats)


def user_data(args: argparse.Namespace) -> UserData:
    """The data flags as a record (codesign.run.data), the preprocessing recipe parsed."""
    from codesign.run.data import DataSource, UserData
    from codesign.run.preprocess import recipe

    labels = getattr(args, "labels", None)
    evaluation = getattr(args, "eval_data", None)
    if labels is not None and evaluation is None:
        raise InputError(f"--labels {labels} labels --eval-data samples; give --eval-data too")
    images = any(p and Path(p).is_dir() for p in (args.calibration_data, evaluation))
    if (args.preprocess or args.preprocess_set) and not images:
        raise InputError("--preprocess applies to a folder of images given with --calibration-data or "
                         "--eval-data")
    steps = recipe(args.preprocess, args.preprocess_set) if images else None
    calibration = None if args.calibration_data is None else DataSource(
        args.calibration_data, steps, None, args.calibration_inputs, "--calibration-data")
    return UserData(calibration, None if evaluation is None else DataSource(evaluation, steps, labels))


def _load(args: argparse.Namespace) -> tuple[AcceleratorConfig, Loaded]:
    from codesign.run.model import load_model
    from compiler.codegen.cpu import use_default_disk_cache, use_default_jit_helper
    from sim.run_cache import RECORDS

    use_default_disk_cache()
    use_default_jit_helper()
    RECORDS.use_default()
    quant = _quant_options(args)
    cfg = resolve(args.config or "vta", args.set)
    # the modules' objects (~10^5, imported by now) live until the command ends: kept out of the
    # collector's passes during the compile and left untouched by its forked workers (no
    # copy-on-write of their pages); and the compile's own young objects (calibration summaries,
    # graph records: few cycles) collected every COMPILE_GC_YOUNG allocations, not 700:
    # EfficientNet-Lite1's compile spent ~0.5 s in ~420 collections, now ~0.1 s in 3
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(COMPILE_GC_YOUNG, *thresholds[1:])
    try:
        loaded = load_model(args.model, cfg, input_shapes(args.input_shape) or None, quant, args.tuning_log,
                            args.offload_shallow, user_data(args))
    finally:
        gc.set_threshold(*thresholds)
    # the model's ~10^5 objects live until the command ends: kept out of the collector's full passes,
    # which the first input's allocations set off (0.1-0.2 s on EfficientNet-Lite1)
    gc.freeze()
    saved = loaded.model.target.cfg
    if args.model.endswith(".cmodel"):
        if args.offload_shallow and not loaded.model.offload_shallow:
            raise InputError(f"{args.model} was compiled with shallow convolutions on the host; "
                             "compile the ONNX model again with --offload-shallow")
        if (args.config or args.set) and cfg.fingerprint() != saved.fingerprint():
            raise InputError(f"{args.model} was compiled for config {saved.name}, not {cfg.name}; "
                             "compile the ONNX model again with codesign compile --config")
        cfg = saved
    return cfg, loaded


def _run(args: argparse.Namespace) -> int:
    from codesign.run.inputs import sample_inputs
    from codesign.run.model import print_table, run

    if args.input_file:
        args.eval_data = args.input_file
    if args.inputs < 1:
        raise InputError(f"--inputs must be at least 1, not {args.inputs}")
    host = args.backend in HOST_BACKENDS
    precision, threads = _host_options(args, host, "--backend cpu or onnxruntime")
    if args.backend == "gpu":  # refused before the model is read, where no GPU runs
        from codesign.run.gpu import check_precision, require_gpu

        check_precision(precision)
        require_gpu("--backend gpu")
    if args.plot:
        if host or not capabilities(args.backend).cycles:
            raise InputError(f"--plot needs --backend {' or '.join(having('cycles'))}: "
                             f"{args.backend} counts no accelerator cycles")
        check_figure_path(args.plot, "--plot")
    if host:
        return _run_host(args, precision, threads)
    cfg, loaded = _load(args)
    graph = loaded.model.graph
    if loaded.evaluation is not None:
        inputs, labels = loaded.evaluation.samples, loaded.evaluation.labels
    else:
        inputs, labels = sample_inputs(graph, loaded.zoo_name, args.inputs, seed=0), None
    shown = progress("running") if len(inputs) > 1 else None
    report = run(loaded, inputs, make_backend(args.backend, cfg), shown, labels)
    if args.plot:
        _plot(report, args.plot)
    if args.json:
        emit(report.to_json(), True, indent=1)
    else:
        print_table(report)
    return 0


def _plot(report: ModelReport, path: str) -> None:
    from codesign.plots import from_steps, layers_figure, save_as

    name = f"{report.model} on {report.config} ({report.backend})"
    save_as(layers_figure([(name, from_steps(report.operators))]), path)


def _run_host(args: argparse.Namespace, precision: str, threads: int) -> int:
    from codesign.run.host import run_host
    from codesign.run.inputs import sample_inputs, zoo_name
    from compiler.codegen.cpu import use_default_disk_cache
    from compiler.frontend import import_onnx

    if args.model.endswith(".cmodel"):
        raise InputError(f"{args.model}: --backend {args.backend} runs an ONNX model, not a .cmodel")
    use_default_disk_cache()
    shapes = input_shapes(args.input_shape) or None
    graph = import_onnx(args.model, shapes)
    user = user_data(args)
    evaluation = user.load_evaluation(graph)  # checked before anything compiles
    if evaluation is not None:
        inputs = evaluation.samples
    else:
        with open(args.model, "rb") as f:
            inputs = sample_inputs(graph, zoo_name(f.read()), args.inputs, seed=0)
    cfg = resolve(args.config or "vta", args.set)
    report = run_host(args.model, args.backend, precision, threads, inputs, cfg, shapes, _quant_options(args),
                      args.tuning_log if args.backend == "cpu" else None, user)
    emit(report.to_json(), args.json, indent=1 if args.json else None,
         keys=None if args.json else [k for k in report.to_json() if k != "operators"])
    return 0


def _compile_cpu(args: argparse.Namespace, precision: str, threads: int) -> int:
    from codesign.run.host import load_cpu
    from compiler.codegen.cpu import cache_info, use_default_disk_cache

    if args.output is not None:
        raise InputError(f"-o {args.output}: --target cpu writes no file; its kernels go to the kernel cache "
                         "and codesign run --backend cpu compiles the ONNX model again from it")
    use_default_disk_cache()
    before = cache_info().from_disk
    model, _, _, seconds = load_cpu(args.model, precision, threads, resolve(args.config, args.set),
                                    input_shapes(args.input_shape) or None, _quant_options(args),
                                    args.tuning_log, user_data(args))
    summary = {"target": "cpu", "precision": model.precision, "threads": threads, "steps": len(model.steps),
               "native_steps": sum(s.where == "host" for s in model.steps), "fallbacks": model.fallbacks(),
               "arena_bytes": model.memory.arena_bytes, "compile_s": seconds,
               "kernels_from_disk_cache": cache_info().from_disk - before}
    emit(summary, args.json)
    return 0


def _compile(args: argparse.Namespace) -> int:
    from compiler.runtime import serialize

    precision, threads = _host_options(args, args.target == "cpu", "--target cpu")
    if args.target == "cpu":
        return _compile_cpu(args, precision, threads)
    if args.output is None:
        raise InputError("-o MODEL.cmodel is required for --target accel")
    if not args.output.endswith(".cmodel"):
        raise InputError(f"-o {args.output}: a compiled model file ends in .cmodel")
    _, loaded = _load(args)
    serialize.save(loaded.model, args.output, {"onnx": args.model, "zoo": loaded.zoo_name})
    model = loaded.model
    summary = {"output": args.output, "steps": len(model.steps),
               "accelerator_steps": sum(s.where == "accel" for s in model.steps),
               "offloaded_macs_fraction": model.offloaded_macs_fraction(),
               "compile_s": loaded.compile_s,
               "kernels_from_disk_cache": loaded.kernels_from_disk,
               "evaluation_samples": None if loaded.evaluation is None else len(loaded.evaluation.samples)}
    emit(summary, args.json)
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    from codesign.run.sensitivity import print_sensitivity, sensitivity

    if args.inputs < 1:
        raise InputError(f"--inputs must be at least 1, not {args.inputs}")
    report = sensitivity(args.model, resolve(args.config, args.set), input_shapes(args.input_shape) or None,
                         _quant_options(args), args.offload_shallow, args.inputs, patterns(args.layers),
                         args.groups, progress("sensitivity"), user_data(args))
    if args.json:
        emit(report.to_json(), True, indent=1)
    else:
        print_sensitivity(report)
    return 0
