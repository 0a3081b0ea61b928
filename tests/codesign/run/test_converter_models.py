"""Models as converters write them (the builders of tests/compiler/frontend/test_converter_patterns.py)
through `codesign run`, at opsets 9, 13 and the newest where their ops exist: imported, quantized,
compiled for the accelerator and run on fsim (one per converter style on the RTL too).  The integer
part equals the integer reference exactly, the output agrees with onnxruntime fp32, every host step
is native code except for ops that have no host kernel, and the placement is the same at every
opset.  About 15 s on one core."""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import pytest

from codesign.cli import main
from codesign.cli.args import input_shapes
from codesign.run.inputs import sample_inputs
from codesign.run.model import Loaded, load_model, run
from hw.config import resolve
from sim.backends import make_backend
from tests.compiler.frontend.onnx_models import NEWEST, OPSETS, Builder
from tests.compiler.frontend.test_converter_patterns import (
    GELU,
    HARD_SIGMOID,
    HARD_SWISH,
    _classifier_input,
    _conv_then,
    _dense,
    _rename_uses,
    bert_like_block,
    pytorch_legacy_cnn,
    tensorflow_cnn,
)
from tests.sim.rtl.stub_accel import needs_verilator

INPUTS = 2  # seeded inputs per run, as `codesign run --inputs 2`
# Mean cosine over the 2 inputs against onnxruntime fp32, measured on vta at every opset (equal
# at all three): tensorflow-cnn 0.9982 (the lowest; its 1-input cosine 0.9964, and 0.9954 at
# batch 3), bert-like 0.9998, hard-swish 0.9999, pytorch-legacy-cnn and hard-sigmoid 0.99997,
# dense-gelu, mlp and conv-classifier >= 0.9999.  Int8 error, not a fault, below 1.
COSINE_MIN = 0.99
# Float ops with no native host kernel (compiler/runtime/cpu.py maps none): the interpreter
# runs them and the report says host-numpy.  The decomposed layer norm of the legacy exporter
# is not fused into LayerNormalization (which has one).
LAYER_NORM_PARTS = frozenset({"ReduceMean", "Pow", "Sqrt"})
Build = Callable[[int], onnx.ModelProto]  # a model at an opset


@dataclass(frozen=True)
class Case:
    build: Build
    since: int = 9  # the first opset that has all its ops
    input_shape: tuple[str, ...] = ()  # --input-shape items binding symbolic dimensions
    numpy_ops: frozenset[str] = frozenset()  # ops run by the interpreter (host-numpy)


def _mlp(spelling: str) -> Build:
    """x -> dense (in `spelling`) -> Relu -> Gemm: the first dense layer is not the output's
    (that one stays float, compiler/quant/static.py), so it is quantized and offloaded."""

    def build(opset: int) -> onnx.ModelProto:
        b = Builder(opset)
        w, bias = b.rng.normal(size=(6, 5)).astype("float32"), b.rng.normal(size=5).astype("float32")
        h = b.op("Relu", [_dense(b, spelling, w, bias)])
        y = b.op("Gemm", [h, b.weight("W2", [4, 5]), b.weight("B2", [4])], "y", transB=1)
        return b.model({"x": [3, 6]}, [y])

    return build


def _conv_classifier(spelling: str) -> Build:
    """Conv -> Relu -> pooling and flatten in `spelling` -> Gemm."""

    def build(opset: int) -> onnx.ModelProto:
        b = Builder(opset)
        c = b.op("Conv", ["x", b.weight("w", [16, 3, 3, 3]), b.weight("b", [16])], pads=[1, 1, 1, 1])
        v = _classifier_input(b, b.op("Relu", [c]), spelling)
        y = b.op("Gemm", [v, b.weight("W", [10, 16]), b.weight("B", [10])], "y", transB=1)
        return b.model({"x": [2, 3, 4, 4]}, [y])

    return build


def _dense_gelu(spelling: str) -> Build:
    """MatMul + Add -> GELU in `spelling` (test_gelu_spellings' model)."""

    def build(opset: int) -> onnx.ModelProto:
        b = Builder(opset)
        h = b.op("Add", [b.op("MatMul", ["x", b.weight("W", [16, 8])]), b.weight("B", [8])], "h")
        _rename_uses(b, GELU[spelling](b, h), "y")
        b.nodes[-1].output[0] = "y"
        return b.model({"x": [4, 16]}, ["y"])

    return build


def _activation(table: dict[str, Callable[[Builder, str], str]], spelling: str) -> Build:
    return lambda opset: _conv_then(Builder(opset), table[spelling])


CASES: dict[str, Case] = {
    "pytorch-legacy-cnn": Case(pytorch_legacy_cnn, input_shape=("x=2,3,8,8",)),
    "tensorflow-cnn": Case(tensorflow_cnn, input_shape=("x=2,8,8,3",)),
    "bert-like": Case(bert_like_block, numpy_ops=LAYER_NORM_PARTS),
    **{f"hard-swish-{k}": Case(_activation(HARD_SWISH, k), 14 if k == "op" else 9) for k in HARD_SWISH},
    **{f"hard-sigmoid-{k}": Case(_activation(HARD_SIGMOID, k)) for k in HARD_SIGMOID},
    **{f"dense-gelu-{k}": Case(_dense_gelu(k), 20 if k == "op" else 9) for k in GELU},
    **{f"mlp-{k}": Case(_mlp(k))
       for k in ("gemm-transB", "gemm-plain", "gemm-alpha-beta", "gemm-transA", "matmul-add")},
    **{f"conv-classifier-{k}": Case(_conv_classifier(k))
       for k in ("gap-flatten", "mean-reshape", "gap-squeeze", "gap-shape-chain", "mean")},
}
# one per converter style: PyTorch legacy (CNN, transformer), TensorFlow, Paddle, PyTorch dynamo
RTL_CASES = ["pytorch-legacy-cnn", "bert-like", "tensorflow-cnn", "hard-swish-paddle-hardsigmoid-mul",
             "conv-classifier-mean-reshape"]


def _opsets(name: str) -> list[int]:
    return [o for o in OPSETS if o >= CASES[name].since]


@functools.cache
def _loaded(name: str, opset: int) -> Loaded:
    """The model imported, quantized and compiled from its file, as `codesign run --offload-shallow`
    does: these models' convolutions read 3 channels, which stay on the host by default."""
    case = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"{name}.onnx")
        onnx.save(case.build(opset), path)
        shapes = input_shapes(list(case.input_shape)) or None
        return load_model(path, resolve("vta", []), shapes, offload_shallow=True)


@functools.cache
def _report(name: str, opset: int, backend: str) -> dict[str, Any]:
    loaded = _loaded(name, opset)
    inputs = sample_inputs(loaded.model.graph, loaded.zoo_name, INPUTS, seed=0)
    return run(loaded, inputs, make_backend(backend, loaded.model.target.cfg)).to_json()


def _placement(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(op["op"], op["where"]) for op in report["operators"]]


@pytest.mark.parametrize("name,opset", [(n, o) for n in CASES for o in _opsets(n)])
def test_converter_model_runs_exact(name: str, opset: int) -> None:
    report = _report(name, opset, "fsim")
    assert report["correct_int8"] is True
    assert report["cosine"] >= COSINE_MIN
    where = _placement(report)
    assert {op for op, w in where if w == "host-numpy"} == CASES[name].numpy_ops
    assert any(w == "accel" and op in ("QConv", "QGemm") for op, w in where)


@pytest.mark.parametrize("name", [n for n in CASES if len(_opsets(n)) > 1])
def test_same_placement_and_outputs_at_every_opset(name: str) -> None:
    """One clean graph at every opset: the same steps in the same places, the same outputs."""
    first, *rest = (_report(name, o, "fsim") for o in _opsets(name))
    assert all(_placement(r) == _placement(first) for r in rest)
    assert all((r["cosine"], r["max_abs_err"]) == (first["cosine"], first["max_abs_err"]) for r in rest)


@needs_verilator[1]
@pytest.mark.rtl
@pytest.mark.parametrize("name", RTL_CASES)
def test_converter_model_on_rtl(name: str) -> None:
    rtl, timing = _report(name, 13, "rtl"), _report(name, 13, "timing")
    assert rtl["correct_int8"] is True
    assert rtl["cosine"] == _report(name, 13, "fsim")["cosine"]  # the same outputs as fsim
    assert rtl["cycles"] == timing["cycles"] > 0
    assert [op["cycles"] for op in rtl["operators"]] == [op["cycles"] for op in timing["operators"]]


def test_cli_binds_the_symbolic_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`codesign run MODEL.onnx --input-shape x=2,3,8,8 --json`, the shallow first (and only)
    convolution on the host as by default, where it stays float: nothing is left to quantize, the
    model runs in float on the host, at least as close to onnxruntime as the offloaded int8 one."""
    path = tmp_path / "model.onnx"
    onnx.save(pytorch_legacy_cnn(NEWEST), path)
    argv = ["run", str(path), "--backend", "fsim", "--inputs", str(INPUTS), "--input-shape", "x=2,3,8,8"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    offloaded = _report("pytorch-legacy-cnn", NEWEST, "fsim")
    assert report["correct_int8"] is True
    assert report["inputs"] == INPUTS and report["backend"] == "fsim"
    assert report["cosine"] >= min(offloaded["cosine"], 0.9999)
    assert [op for op, _ in _placement(report)] == ["Conv", "Relu", "MaxPool", "Flatten", "Gemm"]
    assert {where for _, where in _placement(report)} == {"host", "view"}
    assert [op for op, _ in _placement(offloaded)][:2] == ["Quantize", "QConv"]
