"""Fuzzing the `.npz` files of samples a user hands `codesign run|compile` (`--input-file`,
`--calibration-data`, `--eval-data`, read by codesign.run.data.load_data).

Bases: samples for a one-input model (the zoo's MLP, float32[1,64]: with a sample axis and
labels, or the batch axis holding the samples under another name) and for a two-input model
(int64 and float32 inputs).  A case reads the file for both models, as the commands do; an
accepted file must give samples each model takes as they are (shape, dtype, finite values:
`check_inputs`, which every run applies) and, where it holds labels, one integer per sample.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from codesign.fuzz.engine import Kind
from codesign.fuzz.mutators import npz_mutations, write_arrays
from codesign.run.data import load_data
from codesign.run.inputs import check_inputs
from compiler.frontend import import_onnx
from compiler.graph.ir import Graph
from hw.errors import InputError


@functools.cache
def graphs() -> tuple[Graph, ...]:
    """The two models a case's samples are read for."""
    from codesign import zoo

    pair = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["f", "x"], ["y"])], "pair",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(pair, opset_imports=[helper.make_opsetid("", 13)])
    return (import_onnx(zoo.build("mlp").SerializeToString()), import_onnx(model.SerializeToString()))


def _bases() -> dict[str, Callable[[], bytes]]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    return {
        "mlp-labelled": lambda: write_arrays({"input": rng.normal(size=(4, 1, 64)).astype(f32),
                                              "labels": np.arange(4, dtype=np.int64)}),
        "mlp-batch-axis": lambda: write_arrays({"samples": rng.normal(size=(3, 64)).astype(f32)}),
        "pair": lambda: write_arrays({"ids": rng.integers(0, 9, (2, 1, 8)),
                                      "x": rng.normal(size=(2, 1, 8)).astype(f32)}),
    }


def check(path: Path) -> str:
    """The file read for each model as `--eval-data` (the other options read it the same way):
    "accepted" when either model takes it, with samples `check_inputs` passes (or refuses in one
    line) and integer labels, one per sample; else the first refusal."""
    refusals = []
    for graph in graphs():
        try:
            data = load_data(str(path), graph)
            for sample in data.samples:
                check_inputs(graph, sample)
        except InputError as exc:
            refusals.append(exc)
            continue
        if data.labels is not None:
            labels = data.labels
            assert labels.ndim == 1 and labels.dtype.kind in "iu", f"labels {labels.dtype}{labels.shape}"
            assert len(labels) == len(data.samples), "a label count unlike the sample count"
    if len(refusals) == len(graphs()):
        raise refusals[0]
    return "accepted"


KIND = Kind(name="npz", suffix=".npz", bases=_bases(), mutations=npz_mutations(), check=check)
