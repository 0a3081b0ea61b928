import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelImportError
from compiler.frontend import import_onnx
from compiler.frontend.rebatch import import_at_batch, own_batch
from compiler.graph import run_graph


def _model(inputs, nodes, output, inits=(), output_rank=None):
    """A float model of `nodes`; `inputs` name -> shape; `inits` name -> array."""
    graph = helper.make_graph(
        nodes, "rebatch-test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in dict(inits).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _attention_like():
    """(1, 8) -> MatMul -> Reshape [1, 2, 4] (the batch written into the target, as the zoo's
    bert-tiny writes it) -> Softmax over the last axis -> Reshape [1, 8]."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Reshape", ["h", "split"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("Constant", [], ["merge"],
                              value=numpy_helper.from_array(np.array([1, 8], np.int64))),
             helper.make_node("Reshape", ["p", "merge"], ["y"])]
    inits = {"w": rng.standard_normal((8, 8)).astype(np.float32), "split": np.array([1, 2, 4], np.int64)}
    return _model({"x": [1, 8]}, nodes, "y", inits)


def test_a_model_with_its_batch_in_its_reshapes_runs_each_row_as_the_batch_1_model_does():
    model = _attention_like()
    one, three = import_onnx(model), import_at_batch(model, 3)
    assert three.values["x"].shape == (3, 8) and three.values["y"].shape == (3, 8)
    rows = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    batched = run_graph(three, {"x": rows})["y"]
    for i in range(3):
        alone = run_graph(one, {"x": rows[i:i + 1]})["y"]
        np.testing.assert_allclose(batched[i:i + 1], alone, rtol=1e-6, atol=1e-6)
    assert own_batch(three) == 3


def test_the_model_s_own_batch_is_imported_as_it_is():
    model = _attention_like()
    assert import_at_batch(model, 1).values["y"].shape == (1, 8)


def test_a_zoo_model_re_batches_its_inputs_and_outputs():
    from codesign import zoo

    graph = import_at_batch(zoo.build("mlp"), 2)
    assert [graph.values[n].shape[0] for n in (*graph.inputs, *graph.outputs)] == [2, 2]


def test_a_batch_below_one_is_refused():
    with pytest.raises(ModelImportError, match=r"cannot re-batch to batch 0: the batch must be at least 1"):
        import_at_batch(_attention_like(), 0)


def test_an_input_of_rank_0_has_no_batch():
    model = _model({"x": []}, [helper.make_node("Identity", ["x"], ["y"])], "y")
    with pytest.raises(ModelImportError, match=r"cannot re-batch: input 'x' has rank 0 \(no batch axis\)"):
        import_at_batch(model, 2)


def test_inputs_of_different_leading_axes_have_no_one_batch():
    model = _model({"a": [1, 4], "b": [4, 4]}, [helper.make_node("MatMul", ["a", "b"], ["y"])], "y")
    with pytest.raises(ModelImportError, match=r"cannot re-batch: the inputs' axis 0 differ \(\[1, 4\]\)"):
        import_at_batch(model, 2)


def test_a_batch_folded_into_another_axis_is_refused_naming_the_output():
    model = _model({"x": [1, 4]}, [helper.make_node("Reshape", ["x", "flat"], ["y"])], "y",
                   {"flat": np.array([-1], np.int64)})
    with pytest.raises(ModelImportError, match=r"cannot re-batch from 1 to 2: output 'y' is \[8\], not \[2\] "
                                               r"\(the batch is not its axis 0 alone\)"):
        import_at_batch(model, 2)


def test_a_shape_fixed_elsewhere_is_refused_with_the_import_s_reason():
    model = _model({"x": [1, 4]}, [helper.make_node("Reshape", ["x", "flat"], ["y"])], "y",
                   {"flat": np.array([4], np.int64)})
    with pytest.raises(ModelImportError, match=r"cannot re-batch from 1 to 2: .*cannot reshape"):
        import_at_batch(model, 2)


def test_the_source_model_is_left_as_it_was():
    model = _attention_like()
    before = model.SerializeToString()
    import_at_batch(model, 2)
    assert model.SerializeToString() == before
    assert isinstance(onnx.load_from_string(before), onnx.ModelProto)
