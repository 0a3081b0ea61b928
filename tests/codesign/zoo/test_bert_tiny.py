import collections

import numpy as np
import onnxruntime as ort
import pytest

from codesign import zoo


def _ops(m) -> collections.Counter:
    return collections.Counter(n.op_type for n in m.graph.node)


def test_graph_has_the_operators_of_an_exported_bert(model):
    ops = _ops(model("bert-tiny"))
    expected = {"Gather": 4, "LayerNormalization": 5, "MatMul": 16, "Reshape": 8, "Transpose": 8,
                "Softmax": 2, "Gelu": 2, "Div": 2, "Gemm": 2, "Tanh": 1, "Cast": 1}
    for op, count in expected.items():
        assert ops[op] == count, op
    assert "Erf" not in ops


def test_opset_17_writes_gelu_with_erf_and_computes_the_same(session):
    old = zoo.build("bert-tiny", opset=17)
    assert "Gelu" not in _ops(old) and _ops(old)["Erf"] == 2
    old_session = ort.InferenceSession(old.SerializeToString(), providers=["CPUExecutionProvider"])
    for inputs in zoo.sample_inputs("bert-tiny", 3, seed=5):
        expected = session("bert-tiny").run(None, inputs)[0]
        np.testing.assert_allclose(old_session.run(None, inputs)[0], expected, rtol=1e-5, atol=1e-5)


def test_sample_inputs_are_cls_words_sep_then_padding():
    for x in zoo.sample_inputs("bert-tiny", 20, seed=0):
        ids, mask = x["input_ids"][0], x["attention_mask"][0]
        length = int(mask.sum())
        assert ids.dtype == np.int64 and mask.dtype == np.int64 and 32 <= length <= 128
        assert mask[:length].all() and not mask[length:].any()
        assert ids[0] == 101 and ids[length - 1] == 102 and not ids[length:].any()
        assert ((ids[1 : length - 1] >= 1000) & (ids[1 : length - 1] < 30522)).all()


def test_padding_is_masked_out_and_real_tokens_matter(session):
    x = zoo.sample_inputs("bert-tiny", 1, seed=9)[0]
    length = int(x["attention_mask"].sum())
    assert length < 128
    base = session("bert-tiny").run(None, x)[0]
    padded = {**x, "input_ids": x["input_ids"].copy()}
    padded["input_ids"][0, length:] = 7777
    np.testing.assert_allclose(session("bert-tiny").run(None, padded)[0], base, rtol=1e-5, atol=1e-5)
    changed = {**x, "input_ids": x["input_ids"].copy()}
    changed["input_ids"][0, 1] = 2000 if changed["input_ids"][0, 1] != 2000 else 2001
    assert np.abs(session("bert-tiny").run(None, changed)[0] - base).max() > 1e-3


def test_sequence_length_option_sets_the_input_shape():
    m = zoo.build("bert-tiny", seq_len=16)
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [1, 16]
    inputs = zoo.sample_inputs("bert-tiny", 1, seq_len=16)[0]
    assert inputs["input_ids"].shape == (1, 16)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert s.run(None, inputs)[0].shape == (1, 2)


@pytest.mark.parametrize("seq_len", [1, 513])
def test_sequence_length_out_of_range_is_refused(seq_len):
    with pytest.raises(zoo.ZooError, match=f"bert-tiny sequence length must be in 2..512, not {seq_len}"):
        zoo.build("bert-tiny", seq_len=seq_len)
    with pytest.raises(zoo.ZooError, match="sequence length"):
        zoo.sample_inputs("bert-tiny", 1, seq_len=seq_len)
