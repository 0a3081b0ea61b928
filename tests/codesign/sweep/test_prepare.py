import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from codesign.sweep.operators import padded
from codesign.sweep.prepare import prepare, stack
from codesign.sweep.records import WorkloadSpec
from compiler.errors import ModelImportError


@pytest.fixture(scope="module")
def mlp():
    return prepare(WorkloadSpec("mlp", "mlp"), (8,))


def test_a_workload_at_a_padded_batch_has_the_sweep_s_padded_layers(mlp):
    # the same scales and shifts: its calibration repeats each input, so only the batch changes
    batched = mlp.at_batch(2)
    assert (mlp.batch, batched.batch) == (1, 2)
    want = [padded(s.spec, 1, 2) if s.spec is not None else None for s in mlp.steps_for(8)]
    got = [s.spec for s in batched.steps_for(8)]
    assert got == want and sum(s is not None for s in got) == 2
    assert [c["input"].shape[0] for c in batched.calibration] == [2] * len(mlp.calibration)
    assert mlp.at_batch(1) is mlp


def test_samples_at_a_batch_stack_distinct_seeded_samples(mlp):
    from codesign import zoo

    feeds = mlp.samples_at(2, seed=3)
    first, second = zoo.sample_inputs("mlp", 2, 3)
    assert np.array_equal(feeds["input"], np.concatenate([first["input"], second["input"]]))


def test_stack_repeats_and_cuts_to_the_batch():
    a = {"x": np.arange(2).reshape(1, 2)}
    b = {"x": np.arange(2, 4).reshape(1, 2)}
    assert stack([a, b], 3)["x"].tolist() == [[0, 1], [2, 3], [0, 1]]
    assert stack([a], 2)["x"].tolist() == [[0, 1], [0, 1]]


def folded_model(path):
    """A dense layer whose output folds the batch into its only axis: (1, 16) -> (16,)."""
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Reshape", ["h", "flat"], ["y"])],
        "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([-1], np.int64), "flat")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_a_model_that_cannot_be_re_batched_says_why(tmp_path):
    prepared = prepare(WorkloadSpec("folded", folded_model(tmp_path / "folded.onnx")), (8,))
    with pytest.raises(ModelImportError, match=r"folded.onnx: cannot re-batch from 1 to 2: output 'y'"):
        prepared.at_batch(2)


@pytest.mark.parametrize("name", ["mlp", "digits"])
def test_each_row_of_the_batched_integer_model_is_the_batch_1_model_s(name):
    # every integer tensor exactly (the float ones differ in the last bit: BLAS sums a batch
    # of rows in another order)
    from compiler.graph import run_graph

    prepared = prepare(WorkloadSpec(name, name), (8,))
    one, two = prepared.quantized(8), prepared.at_batch(2).quantized(8)
    ints = [n for node in one.nodes for n in node.outputs
            if np.issubdtype(np.dtype(one.values[n].dtype), np.integer)]
    assert len(ints) >= 3
    feeds = prepared.samples_at(2, seed=5)
    batched = run_graph(two, feeds, keep=ints)
    for row in range(2):
        alone = run_graph(one, {k: v[row:row + 1] for k, v in feeds.items()}, keep=ints)
        for n in ints:
            assert np.array_equal(batched[n][row:row + 1], alone[n]), n
        for out in one.outputs:
            np.testing.assert_allclose(batched[out][row:row + 1], alone[out], rtol=1e-5, atol=1e-5)
