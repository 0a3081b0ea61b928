"""What every zoo model promises: a valid model that runs, the registry's signature, determinism,
parameter counts, and logits that vary with the input."""

import collections

import numpy as np
import onnx
import pytest
from onnx import helper

from codesign import zoo

NAMES = ["bert-tiny", "digits", "efficientnet-lite1", "mlp", "mobilenetv2", "resnet18"]
DTYPES = {"float32": onnx.TensorProto.FLOAT, "int64": onnx.TensorProto.INT64}


def test_names_are_the_six_models():
    assert zoo.names() == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_model_passes_the_full_checker_and_runs_with_the_registered_signature(name, model, session):
    m = model(name)
    onnx.checker.check_model(m, full_check=True)
    info = zoo.info(name)
    tensor = [(i.name, i.type.tensor_type) for i in m.graph.input]
    graph_inputs = [(name, t.elem_type, [d.dim_value for d in t.shape.dim]) for name, t in tensor]
    assert graph_inputs == [(n, DTYPES[d], list(s)) for n, d, s in info.inputs]
    assert [o.name for o in m.graph.output] == ["logits"]
    assert m.opset_import[0].version == zoo.DEFAULT_OPSET
    assert m.ir_version == helper.find_min_ir_version_for(list(m.opset_import))
    for inputs in zoo.sample_inputs(name, 2, seed=7):
        (logits,) = session(name).run(None, inputs)
        assert logits.shape == info.output_shape and logits.dtype == np.float32
        assert np.isfinite(logits).all()


@pytest.mark.parametrize("name", NAMES)
def test_build_is_deterministic(name, built):
    assert zoo.build(name).SerializeToString() == built(name)


def test_seed_changes_the_weights(built):
    assert zoo.build("mlp", seed=1).SerializeToString() != built("mlp")


@pytest.mark.parametrize("name", NAMES)
def test_parameter_count_matches_the_registry(name, model):
    """Parameters are the initializers named *.weight / *.bias (batch-norm buffers and constants are not)."""
    count = sum(int(np.prod(t.dims)) for t in model(name).graph.initializer
                if t.name.endswith((".weight", ".bias")))
    assert count == zoo.info(name).parameters


# (distinct argmax classes at least, largest share of one class at most) over 100 sample inputs
SPREAD = {"resnet18": (40, 0.15), "mobilenetv2": (30, 0.25), "mlp": (6, 0.4), "bert-tiny": (2, 0.7)}


@pytest.mark.parametrize("name", sorted(SPREAD))
def test_top1_class_varies_across_sample_inputs(name, session):
    """Logits with a real spread whose argmax differs between inputs, no class dominating."""
    logits = np.concatenate([session(name).run(None, x)[0] for x in zoo.sample_inputs(name, 100, seed=1)])
    counts = collections.Counter(logits.argmax(axis=1).tolist())
    distinct, share = SPREAD[name]
    assert len(counts) >= distinct and max(counts.values()) <= share * 100
    assert 1.0 < logits.std(axis=1).mean() < 10.0  # neither collapsed nor exploded


@pytest.mark.parametrize(("name", "opset"), [("mlp", 9), ("mlp", 13), ("mlp", zoo.MAX_OPSET),
                                             ("bert-tiny", zoo.MAX_OPSET)])
def test_other_opsets_check_and_run(name, opset):
    import onnxruntime as ort

    m = zoo.build(name, opset=opset)
    onnx.checker.check_model(m, full_check=True)
    assert m.opset_import[0].version == opset
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, zoo.sample_inputs(name, 1)[0])[0].shape == zoo.info(name).output_shape


@pytest.mark.parametrize("name", NAMES)
def test_sample_inputs_are_seeded_and_a_longer_list_starts_with_the_shorter(name):
    short, long = zoo.sample_inputs(name, 2, seed=3), zoo.sample_inputs(name, 3, seed=3)
    for a, b in zip(short, long, strict=False):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    other = zoo.sample_inputs(name, 2, seed=4)
    assert any(not np.array_equal(short[0][k], other[0][k]) for k in short[0])
    assert zoo.sample_inputs(name, 0) == []
