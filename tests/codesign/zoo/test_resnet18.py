import collections

import onnx

from codesign.zoo import images, resnet18
from compiler.ops.accel.resnet18 import CLASSIFIER, CONVS
from tests.codesign.zoo.stats import batch_norm_inputs, check_batch_norms


def _conv_rows(m: onnx.ModelProto) -> list[tuple[int, ...]]:
    """(N, C, H, W, K, kernel, stride, pad) of each Conv, from shape inference."""
    inferred = onnx.shape_inference.infer_shapes(m)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.graph.value_info, *inferred.graph.input]}
    weights = {t.name: list(t.dims) for t in m.graph.initializer}
    rows = []
    for node in m.graph.node:
        if node.op_type == "Conv":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            k, _, kh, _ = weights[node.input[1]]
            rows.append((*shapes[node.input[0]], k, kh, attrs["strides"][0], attrs["pads"][0]))
    return rows


def test_convolutions_are_resnet18s_twenty_with_the_eleven_shapes_of_the_compiler_table(model):
    m = model("resnet18")
    rows = collections.Counter(_conv_rows(m))
    # Each shape of the table occurs once per conv using it: stage 1 has four 3x3 convs, each
    # later stage one strided 3x3, one 1x1 skip and three 3x3.
    expected = collections.Counter({tuple(row[1:]): 1 for row in CONVS})
    for row in CONVS:
        if row[0] == "layer1":
            expected[tuple(row[1:])] = 4
        elif row[0] in ("layer2", "layer3", "layer4"):
            expected[tuple(row[1:])] = 3
    assert rows == expected and sum(rows.values()) == 20 and len(rows) == 11


def test_node_counts_batch_norms_unfolded_and_classifier_shape(model):
    m = model("resnet18")
    ops = collections.Counter(n.op_type for n in m.graph.node)
    assert ops == {"Conv": 20, "BatchNormalization": 20, "Relu": 17, "Add": 8, "MaxPool": 1,
                   "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    producers = {n.output[0]: n.op_type for n in m.graph.node}
    assert all(producers[n.input[0]] == "Conv" for n in m.graph.node if n.op_type == "BatchNormalization")
    assert all(len(n.input) == 2 for n in m.graph.node if n.op_type == "Conv")  # no bias before a BN
    fc = {t.name: list(t.dims) for t in m.graph.initializer}
    assert fc["fc.weight"] == [CLASSIFIER.n, CLASSIFIER.k] and fc["fc.bias"] == [CLASSIFIER.n]


def test_batch_norm_statistics_are_those_of_their_inputs_and_not_trivial(model):
    m = model("resnet18")
    calibration = images.imagenet_like(resnet18.CALIBRATION_IMAGES, 0, stream=1)
    inputs = batch_norm_inputs(m, {"input": calibration})
    assert len(inputs) == 20
    check_batch_norms(m, inputs)
