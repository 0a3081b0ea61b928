"""The trained EfficientNet-Lite1: weights read without torch, the exporter's graph, real predictions."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from codesign import zoo
from codesign.zoo.efficientnet_lite import same_pads
from compiler.frontend import import_onnx
from compiler.graph.passes import simplify


def test_same_pads_are_tensorflows() -> None:
    assert same_pads(240, 3, 2) == (0, 1)  # the odd pad at the end
    assert same_pads(60, 5, 2) == (1, 2)
    assert same_pads(15, 5, 2) == (2, 2)
    assert same_pads(30, 3, 1) == (1, 1)
    assert same_pads(30, 1, 1) == (0, 0)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return zoo.build("efficientnet-lite1", opset=17)


def test_the_exporters_pads_fold_away(model) -> None:  # type: ignore[no-untyped-def]
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Pad") == 22 and ops.count("ConstantOfShape") == 22 and ops.count("Conv") == 64
    g = simplify(import_onnx(model))
    assert not [n for n in g.nodes if n.op == "Pad"]
    stem = next(n for n in g.nodes if n.op == "Conv")
    assert stem.ints_attr("pads") == (0, 0, 1, 1)  # TF's asymmetric "same" padding at stride 2


def test_trained_weights_recognise_a_cat_and_coffee(model) -> None:  # type: ignore[no-untyped-def]
    from PIL import Image

    from codesign.zoo.photos import photo_files

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    tops = {}
    for path in photo_files("evaluation"):
        if path.stem not in ("chelsea", "coffee"):
            continue
        with Image.open(path) as im:
            rgb = im.convert("RGB").resize((240, 240), Image.Resampling.BILINEAR)
        x = ((np.asarray(rgb, np.float32) - 127) / 128).transpose(2, 0, 1)[None]
        tops[path.stem] = int(session.run(None, {"input": x})[0].argmax())
    assert tops["chelsea"] in range(281, 286)  # tabby, tiger, Persian, Siamese, Egyptian cat
    assert tops["coffee"] in (967, 968)  # espresso, cup
