import collections

import numpy as np
import onnx
import onnxruntime as ort

from codesign import zoo
from codesign.zoo import images, mobilenetv2
from tests.codesign.zoo.stats import batch_norm_inputs, check_batch_norms


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_node_counts_are_mobilenetv2s(model):
    ops = collections.Counter(n.op_type for n in model("mobilenetv2").graph.node)
    assert ops == {"Conv": 52, "BatchNormalization": 52, "Clip": 35, "Add": 10, "GlobalAveragePool": 1,
                   "Flatten": 1, "Gemm": 1}


def test_seventeen_depthwise_convolutions_have_group_equal_to_channels(model):
    m = model("mobilenetv2")
    weights = {t.name: list(t.dims) for t in m.graph.initializer}
    depthwise = []
    for node in m.graph.node:
        group = _attrs(node).get("group", 1) if node.op_type == "Conv" else 1
        if group != 1:
            out_channels, in_per_group, kernel, _ = weights[node.input[1]]
            assert group == out_channels and in_per_group == 1 and kernel == 3
            depthwise.append(group)
    assert len(depthwise) == 17
    assert sorted(set(depthwise)) == [32, 96, 144, 192, 384, 576, 960]


def test_relu6_is_clip_with_bound_inputs_zero_and_six(model):
    m = model("mobilenetv2")
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for node in (n for n in m.graph.node if n.op_type == "Clip"):
        assert len(node.input) == 3 and not node.attribute
        assert (constants[node.input[1]], constants[node.input[2]]) == (0.0, 6.0)


def test_opset_9_writes_clip_bounds_as_attributes_with_the_same_result(session):
    old = zoo.build("mobilenetv2", opset=9)
    onnx.checker.check_model(old, full_check=True)
    clips = [n for n in old.graph.node if n.op_type == "Clip"]
    assert len(clips) == 35
    assert all(len(n.input) == 1 and _attrs(n) == {"min": 0.0, "max": 6.0} for n in clips)
    inputs = zoo.sample_inputs("mobilenetv2", 1, seed=2)[0]
    ours = ort.InferenceSession(old.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    np.testing.assert_allclose(ours[0], session("mobilenetv2").run(None, inputs)[0], rtol=1e-5, atol=1e-5)


def test_batch_norm_statistics_are_those_of_their_inputs_and_not_trivial(model):
    m = model("mobilenetv2")
    calibration = images.imagenet_like(mobilenetv2.CALIBRATION_IMAGES, 0, stream=1)
    inputs = batch_norm_inputs(m, {"input": calibration})
    assert len(inputs) == 52
    check_batch_norms(m, inputs)


def test_depthwise_filters_have_a_dc_component(model):
    """Depthwise filters' taps sum well away from 0, so smooth inputs pass (layers.depthwise_weight)."""
    m = model("mobilenetv2")
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for node in (n for n in m.graph.node if n.op_type == "Conv" and _attrs(n).get("group", 1) > 1):
        w = weights[node.input[1]]
        dc = np.abs(w.sum(axis=(1, 2, 3))) / np.linalg.norm(w.reshape(len(w), -1), axis=1)
        assert np.median(dc) > 1.5
