"""`codesign compile` and `codesign run`: whole ONNX models on a candidate design."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from codesign.cli.args import add_config_args, input_shapes, patterns
from codesign.cli.output import emit, progress
from hw.config import AcceleratorConfig, resolve
from hw.errors import InputError
from sim.backends import NAMES, make_backend

if TYPE_CHECKING:  # the model pipeline is imported when a command runs, not when the CLI starts
    from codesign.run.model import Loaded
    from compiler.driver import QuantOptions


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="compile (ONNX) and run a model; per-operator cycles and accuracy")
    run.add_argument("model", metavar="MODEL.onnx|MODEL.cmodel")
    add_config_args(run)
    run.add_argument("--backend", choices=NAMES, default="fsim")
    group = run.add_mutually_exclusive_group()
    group.add_argument("--inputs", type=int, default=1, metavar="N", help="N seeded inputs (default 1)")
    group.add_argument("--input-file", metavar="X.npz",
                       help="inputs: one array per model input, samples first")
    _model_args(run)
    run.add_argument("--json", action="store_true")
    run.set_defaults(run=_run, config=None)  # a .cmodel carries its own config
    comp = sub.add_parser("compile", help="import, quantize and compile an ONNX model to one file")
    comp.add_argument("model", metavar="MODEL.onnx")
    comp.add_argument("-o", "--output", required=True, metavar="MODEL.cmodel")
    add_config_args(comp)
    _model_args(comp)
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(run=_compile)
    sens = sub.add_parser("sensitivity", help="the int8 error each layer costs: the model quantized with "
                          "each convolution or dense layer float in turn, against fp32")
    sens.add_argument("model", metavar="MODEL.onnx")
    add_config_args(sens)
    sens.add_argument("--inputs", type=int, default=20, metavar="N", help="N seeded inputs (default 20)")
    group = sens.add_mutually_exclusive_group()
    group.add_argument("--layers", action="append", default=[], metavar="PATTERN[,PATTERN...]",
                       help="only these layers (matched as --float-layers; default: all)")
    group.add_argument("--groups", nargs="+", default=[], metavar="PATTERN",
                       help="candidates of several layers: each pattern's layers float together "
                            "(e.g. 'features.1.*' 'features.2.*')")
    _quant_args(sens)
    sens.add_argument("--json", action="store_true")
    sens.set_defaults(run=_sensitivity)


def _model_args(p: argparse.ArgumentParser) -> None:
    _quant_args(p)
    p.add_argument("--tuning-log", metavar="FILE",
                   help="schedules from a tuning log (codesign tune) where it has the operator")


def _quant_args(p: argparse.ArgumentParser) -> None:
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


def _load(args: argparse.Namespace) -> tuple[AcceleratorConfig, Loaded]:
    from codesign.run.model import load_model
    from compiler.codegen.cpu import use_default_disk_cache

    use_default_disk_cache()
    quant = _quant_options(args)
    cfg = resolve(args.config or "vta", args.set)
    loaded = load_model(args.model, cfg, input_shapes(args.input_shape) or None, quant, args.tuning_log,
                        args.offload_shallow)
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
    from codesign.run.inputs import read_input_file, sample_inputs
    from codesign.run.model import print_table, run

    if args.inputs < 1:
        raise InputError(f"--inputs must be at least 1, not {args.inputs}")
    cfg, loaded = _load(args)
    graph = loaded.model.graph
    if args.input_file:
        inputs = read_input_file(args.input_file, graph)
    else:
        inputs = sample_inputs(graph, loaded.zoo_name, args.inputs, seed=0)
    shown = progress("running") if len(inputs) > 1 else None
    report = run(loaded, inputs, make_backend(args.backend, cfg), shown)
    if args.json:
        emit(report.to_json(), True, indent=1)
    else:
        print_table(report)
    return 0


def _compile(args: argparse.Namespace) -> int:
    from compiler.runtime import serialize

    if not args.output.endswith(".cmodel"):
        raise InputError(f"-o {args.output}: a compiled model file ends in .cmodel")
    _, loaded = _load(args)
    serialize.save(loaded.model, args.output, {"onnx": args.model, "zoo": loaded.zoo_name})
    model = loaded.model
    summary = {"output": args.output, "steps": len(model.steps),
               "accelerator_steps": sum(s.where == "accel" for s in model.steps),
               "offloaded_macs_fraction": model.offloaded_macs_fraction(),
               "compile_s": loaded.compile_s,
               "kernels_from_disk_cache": loaded.kernels_from_disk}
    emit(summary, args.json)
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    from codesign.run.sensitivity import print_sensitivity, sensitivity

    if args.inputs < 1:
        raise InputError(f"--inputs must be at least 1, not {args.inputs}")
    report = sensitivity(args.model, resolve(args.config, args.set), input_shapes(args.input_shape) or None,
                         _quant_options(args), args.offload_shallow, args.inputs, patterns(args.layers),
                         args.groups, progress("sensitivity"))
    if args.json:
        emit(report.to_json(), True, indent=1)
    else:
        print_sensitivity(report)
    return 0
