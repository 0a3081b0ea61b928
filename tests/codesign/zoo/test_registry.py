import pytest

from codesign import zoo


def test_unknown_model_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown model 'resnet50'; known models: bert-tiny, digits, "
                                         "efficientnet-lite1, mlp, mobilenetv2, resnet18"):
        zoo.build("resnet50")
    with pytest.raises(zoo.ZooError, match="unknown model"):
        zoo.sample_inputs("nope", 1)


@pytest.mark.parametrize(("name", "opset", "message"), [
    ("resnet18", 8, "resnet18 supports opsets 9 to"),
    ("bert-tiny", 16, "bert-tiny supports opsets 17 to"),
    ("mlp", zoo.MAX_OPSET + 1, f"mlp supports opsets 9 to {zoo.MAX_OPSET}, not {zoo.MAX_OPSET + 1}"),
])
def test_opset_outside_the_range_is_refused(name, opset, message):
    with pytest.raises(zoo.ZooError, match=message):
        zoo.build(name, opset=opset)


def test_unknown_option_and_negative_count_are_refused():
    with pytest.raises(zoo.ZooError, match=r"mlp takes no option 'seq_len' \(options: none\)"):
        zoo.build("mlp", seq_len=4)
    with pytest.raises(zoo.ZooError, match="bert-tiny takes no option 'width' \\(options: seq_len\\)"):
        zoo.sample_inputs("bert-tiny", 1, width=2)
    with pytest.raises(zoo.ZooError, match="sample count must be >= 0, not -1"):
        zoo.sample_inputs("mlp", -1)


def test_info_dict_lists_inputs_outputs_and_opsets():
    d = zoo.info("bert-tiny").to_dict()
    assert [i["name"] for i in d["inputs"]] == ["input_ids", "attention_mask"]
    assert d["outputs"] == [{"name": "logits", "dtype": "float32", "shape": [1, 2]}]
    assert d["opsets"] == [17, zoo.MAX_OPSET] and d["options"] == ["seq_len"]
