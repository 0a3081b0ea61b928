"""Models as converters write them (PyTorch legacy/dynamo, TensorFlow, Paddle), at opsets 9, 13
and the newest where their ops exist: import + simplify gives one clean graph per model, written
out below by hand, and the clean graph computes what onnxruntime computes on the original file."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
import pytest

from compiler.graph import Graph, print_graph
from tests.compiler.frontend.onnx_models import (
    NEWEST,
    OPSETS,
    Builder,
    assert_matches_ort,
    import_and_simplify,
)

SHAPES = {"x": (2, 3, 8, 8)}


def _bn(b: Builder, x: str, c: int, out: str) -> str:
    """An unfolded batch norm with trained-looking statistics."""
    params = [
        b.init(f"{out}.scale", b.rng.uniform(0.5, 1.5, c).astype(np.float32)),
        b.weight(f"{out}.bias", [c]),
        b.weight(f"{out}.mean", [c]),
        b.init(f"{out}.var", b.rng.uniform(0.5, 2.0, c).astype(np.float32)),
    ]
    return b.op("BatchNormalization", [x, *params], out)


def pytorch_legacy_cnn(opset: int) -> onnx.ModelProto:
    """Constant-node weights, unfolded BN, Identity, Shape->Gather->Unsqueeze->Concat->Reshape,
    Dropout, Gemm with transB, a ConstantOfShape-made bias; symbolic batch."""
    b = Builder(opset)
    w = b.constant("conv.weight", (b.rng.normal(size=(16, 3, 3, 3)) * 0.3).astype(np.float32))
    c = b.op("Conv", ["x", w, b.weight("conv.bias", [16])], "c", pads=[1, 1, 1, 1])
    r = b.op("Relu", [_bn(b, c, 16, "bn")], "r")
    p = b.op("MaxPool", [b.op("Identity", [r], "i")], "p", kernel_shape=[2, 2], strides=[2, 2])
    f = b.dropout(b.flatten_by_shape(p, "f"), "d")
    value = onnx.numpy_helper.from_array(np.array([0.1], np.float32))
    bias = b.op("ConstantOfShape", [b.ints([10])], "fc.bias", value=value)
    y = b.op("Gemm", [f, b.weight("fc.weight", [10, 256], 0.1), bias], "y", transB=1)
    return b.model({"x": ["N", 3, 8, 8]}, [y])


PYTORCH_LEGACY_CNN = """\
graph g(x: float32[2,3,8,8]) -> (y)
  const conv.weight: float32[16,3,3,3]
  const conv.bias: float32[16]
  const fc.weight: float32[10,256]
  const fc.bias: float32[10]
  bn: float32[2,16,8,8] = Conv(x, conv.weight, conv.bias) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]
  r: float32[2,16,8,8] = Relu(bn)
  p: float32[2,16,4,4] = MaxPool(r) ceil_mode=0 dilations=[1,1] kernel_shape=[2,2] pads=[0,0,0,0] strides=[2,2]
  f: float32[2,256] = Flatten(p) axis=1
  y: float32[2,10] = Gemm(f, fc.weight, fc.bias) alpha=1.0 beta=1.0 transA=0 transB=1"""  # noqa: E501


def tensorflow_cnn(opset: int) -> onnx.ModelProto:
    """NHWC input transposed, HWIO weights transposed by a node, BN unfolded into Mul + Add,
    ReLU6 as Clip, spatial mean, MatMul + Add classifier."""
    b = Builder(opset)
    t = b.op("Transpose", ["x"], "t", perm=[0, 3, 1, 2])
    hwio = b.constant("w_hwio", (b.rng.normal(size=(3, 3, 3, 16)) * 0.3).astype(np.float32))
    w = b.op("Transpose", [hwio], "w_oihw", perm=[3, 2, 0, 1])
    c = b.op("Conv", [t, w], "c", pads=[1, 1, 1, 1])
    m = b.op("Mul", [c, b.init("bn_scale", b.rng.uniform(0.5, 1.5, (16, 1, 1)).astype(np.float32))], "m")
    a = b.op("Add", [m, b.weight("bn_shift", [16, 1, 1])], "a")
    g = b.reduce_mean(b.clip(a, 0.0, 6.0, "r6"), [2, 3], keepdims=0, out="g")
    y = b.op("Add", [b.op("MatMul", [g, b.weight("W", [16, 10])], "mm"), b.weight("B", [10])], "y")
    return b.model({"x": ["N", 8, 8, 3]}, [y])


TENSORFLOW_CNN = """\
graph g(x: float32[2,8,8,3]) -> (y)
  const w_oihw: float32[16,3,3,3]
  const Conv_c.bias: float32[16]
  const W: float32[10,16]
  const B: float32[10]
  t: float32[2,3,8,8] = Transpose(x) perm=[0,3,1,2]
  a: float32[2,16,8,8] = Conv(t, w_oihw, Conv_c.bias) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]
  r6: float32[2,16,8,8] = Clip(a) max=6.0 min=0.0
  g/pooled: float32[2,16,1,1] = GlobalAveragePool(r6)
  g: float32[2,16] = Flatten(g/pooled) axis=1
  y: float32[2,10] = Gemm(g, W, B) alpha=1.0 beta=1.0 transA=0 transB=1"""


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "build,expected",
    [(pytorch_legacy_cnn, PYTORCH_LEGACY_CNN), (tensorflow_cnn, TENSORFLOW_CNN)],
    ids=["pytorch-legacy", "tensorflow"],
)
def test_converter_cnn_imports_clean(
    build: Callable[[int], onnx.ModelProto], expected: str, opset: int
) -> None:
    model = build(opset)
    shapes = {"x": (2, 8, 8, 3)} if build is tensorflow_cnn else SHAPES
    graph = import_and_simplify(model, shapes)
    assert print_graph(graph) == expected
    assert_matches_ort(model, graph, seed=opset)


# -- the same computation in each exporter's spelling ------------------------------------------------


def _conv_then(b: Builder, act: Callable[[Builder, str], str]) -> onnx.ModelProto:
    """x -> Conv -> act -> y, so folding cannot hide the activation's pattern in a bias."""
    c = b.op("Conv", ["x", b.weight("w", [16, 3, 3, 3]), b.weight("b", [16])], "c", pads=[1, 1, 1, 1])
    b.nodes[-1].output[0] = "c"
    out = act(b, c)
    b.nodes[-1].output[0] = "y"  # every spelling ends in y
    _rename_uses(b, out, "y")
    return b.model({"x": [2, 3, 8, 8]}, ["y"])


def _rename_uses(b: Builder, old: str, new: str) -> None:
    for n in b.nodes:
        for i, name in enumerate(n.input):
            if name == old:
                n.input[i] = new


def _relu6_plus3(b: Builder, x: str) -> str:
    return b.clip(b.op("Add", [x, b.floats(3.0)]), 0.0, 6.0)


def _min_max_relu6_plus3(b: Builder, x: str) -> str:
    """min(max(x + 3, 0), 6) as TensorFlow's converters write ReLU6."""
    return b.op("Min", [b.op("Max", [b.op("Add", [x, b.floats(3.0)]), b.floats(0.0)]), b.floats(6.0)])


HARD_SWISH = {
    "op": lambda b, x: b.op("HardSwish", [x]),
    "paddle-hardsigmoid-mul": lambda b, x: b.op("Mul", [x, b.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5)]),
    "pytorch-clip-div": lambda b, x: b.op("Div", [b.op("Mul", [x, _relu6_plus3(b, x)]), b.floats(6.0)]),
    "mul-sixth": lambda b, x: b.op("Mul", [b.floats(1 / 6), b.op("Mul", [_relu6_plus3(b, x), x])]),
    "clip-div-then-mul": lambda b, x: b.op("Mul", [x, b.op("Div", [_relu6_plus3(b, x), b.floats(6.0)])]),
    "tensorflow-min-max": lambda b, x: b.op(
        "Mul", [x, b.op("Mul", [_min_max_relu6_plus3(b, x), b.floats(1 / 6)])]
    ),
}
HARD_SIGMOID = {
    "op": lambda b, x: b.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5),
    "clip-div": lambda b, x: b.op("Div", [_relu6_plus3(b, x), b.floats(6.0)]),
    "clip-mul": lambda b, x: b.op("Mul", [_relu6_plus3(b, x), b.floats(1 / 6)]),
}
ACTIVATION = """\
graph g(x: float32[2,3,8,8]) -> (y)
  const w: float32[16,3,3,3]
  const b: float32[16]
  c: float32[2,16,8,8] = Conv(x, w, b) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]
  y: float32[2,16,8,8] = {op}(c){attrs}"""


def _spellings(table: dict[str, Callable[[Builder, str], str]], op_since: int) -> list[tuple[str, int]]:
    return [(k, o) for k in table for o in OPSETS if k != "op" or o >= op_since]


@pytest.mark.parametrize("spelling,opset", _spellings(HARD_SWISH, 14))
def test_hard_swish_spellings(spelling: str, opset: int) -> None:
    model = _conv_then(Builder(opset), HARD_SWISH[spelling])
    graph = import_and_simplify(model)
    assert print_graph(graph) == ACTIVATION.format(op="HardSwish", attrs="")
    assert_matches_ort(model, graph)


@pytest.mark.parametrize("spelling,opset", _spellings(HARD_SIGMOID, 9))
def test_hard_sigmoid_spellings(spelling: str, opset: int) -> None:
    model = _conv_then(Builder(opset), HARD_SIGMOID[spelling])
    graph = import_and_simplify(model)
    assert print_graph(graph) == ACTIVATION.format(op="HardSigmoid", attrs=" alpha=0.16666667 beta=0.5")
    assert_matches_ort(model, graph)


def _erf_gelu(b: Builder, x: str) -> str:
    """PyTorch's legacy export: x * (erf(x / sqrt2) + 1) * 0.5."""
    e = b.op("Add", [b.op("Erf", [b.op("Div", [x, b.floats(math.sqrt(2))])]), b.floats(1.0)])
    return b.op("Mul", [b.op("Mul", [x, e]), b.floats(0.5)])


def _erf_gelu_tf(b: Builder, x: str) -> str:
    """TensorFlow's: (0.5 * x) * (1 + erf(x * 1/sqrt2))."""
    e = b.op("Add", [b.floats(1.0), b.op("Erf", [b.op("Mul", [x, b.floats(1 / math.sqrt(2))])])])
    return b.op("Mul", [b.op("Mul", [b.floats(0.5), x]), e])


def _erf_gelu_half_first(b: Builder, x: str) -> str:
    """((1 + erf(x / sqrt2)) * 0.5) * x."""
    e = b.op("Add", [b.op("Erf", [b.op("Div", [x, b.floats(math.sqrt(2))])]), b.floats(1.0)])
    return b.op("Mul", [b.op("Mul", [e, b.floats(0.5)]), x])


GELU = {
    "op": lambda b, x: b.op("Gelu", [x]),
    "erf-pytorch": _erf_gelu,
    "erf-tensorflow": _erf_gelu_tf,
    "erf-half-first": _erf_gelu_half_first,
}
DENSE_GELU = """\
graph g(x: float32[4,16]) -> (y)
  const W: float32[8,16]
  const B: float32[8]
  h: float32[4,8] = Gemm(x, W, B) alpha=1.0 beta=1.0 transA=0 transB=1
  y: float32[4,8] = Gelu(h) approximate='none'"""


@pytest.mark.parametrize("spelling,opset", _spellings(GELU, 20))
def test_gelu_spellings(spelling: str, opset: int) -> None:
    b = Builder(opset)
    h = b.op("Add", [b.op("MatMul", ["x", b.weight("W", [16, 8])]), b.weight("B", [8])], "h")
    _rename_uses(b, GELU[spelling](b, h), "y")
    b.nodes[-1].output[0] = "y"
    model = b.model({"x": [4, 16]}, ["y"])
    graph = import_and_simplify(model)
    assert print_graph(graph) == DENSE_GELU
    assert_matches_ort(model, graph)


def _classifier_input(b: Builder, x: str, spelling: str) -> str:
    """[2, 16, 4, 4] -> [2, 16] the way each exporter writes global pooling + flatten."""
    if spelling == "gap-flatten":  # PyTorch legacy
        return b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    if spelling == "mean-reshape":  # PyTorch dynamo
        return b.op("Reshape", [b.reduce_mean(x, [-1, -2]), b.ints([2, -1])])
    if spelling == "gap-squeeze":  # TensorFlow
        return b.squeeze(b.op("GlobalAveragePool", [x]), [2, 3])
    if spelling == "gap-shape-chain":  # PyTorch x.view(x.size(0), -1)
        return b.flatten_by_shape(b.op("GlobalAveragePool", [x]))
    return b.reduce_mean(x, [2, 3], keepdims=0)  # "mean"


CLASSIFIER = """\
graph g(x: float32[2,16,4,4]) -> (y)
  const c0: float32[10,16]
  const c1: float32[10]
  v0: float32[2,16,1,1] = GlobalAveragePool(x)
  v1: float32[2,16] = Flatten(v0) axis=1
  y: float32[2,10] = Gemm(v1, c0, c1) alpha=1.0 beta=1.0 transA=0 transB=1"""


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "spelling", ["gap-flatten", "mean-reshape", "gap-squeeze", "gap-shape-chain", "mean"]
)
def test_flatten_before_gemm_spellings(spelling: str, opset: int) -> None:
    b = Builder(opset)
    v = _classifier_input(b, "x", spelling)
    y = b.op("Gemm", [v, b.weight("W", [10, 16]), b.weight("B", [10])], "y", transB=1)
    model = b.model({"x": [2, 16, 4, 4]}, [y])
    graph = import_and_simplify(model)
    assert print_graph(graph, rename=True) == CLASSIFIER
    assert_matches_ort(model, graph)


def _dense(b: Builder, spelling: str, w: np.ndarray, bias: np.ndarray) -> str:
    """x @ w + bias as Gemm in several attribute forms or as MatMul + Add."""
    if spelling == "gemm-transB":
        return b.op("Gemm", ["x", b.init("W", w.T.copy()), b.init("B", bias)], transB=1)
    if spelling == "gemm-plain":
        return b.op("Gemm", ["x", b.init("W", w), b.init("B", bias.reshape(1, -1))])
    if spelling == "gemm-alpha-beta":  # 2 * (x @ (w / 2)) + 0.5 * (2 * bias)
        return b.op("Gemm", ["x", b.init("W", w / 2), b.init("B", 2 * bias)], alpha=2.0, beta=0.5)
    if spelling == "gemm-transA":
        xt = b.op("Transpose", ["x"])
        return b.op("Gemm", [xt, b.init("W", w), b.init("B", bias)], transA=1)
    return b.op("Add", [b.init("B", bias), b.op("MatMul", ["x", b.init("W", w)])])  # "matmul-add"


DENSE = """\
graph g(x: float32[3,6]) -> ({out})
  const c0: float32[5,6]
  const c1: float32[5]
  {out}: float32[3,5] = Gemm(x, c0, c1) alpha=1.0 beta=1.0 transA=0 transB=1"""


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "spelling", ["gemm-transB", "gemm-plain", "gemm-alpha-beta", "gemm-transA", "matmul-add"]
)
def test_dense_spellings(spelling: str, opset: int) -> None:
    b = Builder(opset)
    w = b.rng.normal(size=(6, 5)).astype(np.float32)
    bias = b.rng.normal(size=5).astype(np.float32)
    out = _dense(b, spelling, w, bias)
    model = b.model({"x": [3, 6]}, [out])
    graph = import_and_simplify(model)
    # gemm-transA: the exporter's Transpose and the one normalisation adds for transA cancel out
    assert print_graph(graph, rename=True) == DENSE.format(out=out)
    np.testing.assert_allclose(graph.values[graph.nodes[-1].inputs[1]].data, w.T, rtol=1e-6)
    np.testing.assert_allclose(graph.values[graph.nodes[-1].inputs[2]].data, bias, rtol=1e-6)
    assert_matches_ort(model, graph)


def bert_like_block(opset: int) -> onnx.ModelProto:
    """A transformer block as the legacy exporter writes it before LayerNormalization and Gelu
    existed: decomposed layer norm, Erf GELU, attention with Transpose/Softmax, Dropout, Identity."""
    b = Builder(opset)
    x = "x"
    q = b.op("MatMul", [x, b.weight("Wq", [8, 8])])
    k = b.op("Transpose", [b.op("MatMul", [x, b.weight("Wk", [8, 8])])], perm=[0, 2, 1])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.floats(math.sqrt(8))])
    att = b.dropout(b.op("Softmax", [scores], axis=2))
    ctx_ = b.op("MatMul", [att, b.op("MatMul", [x, b.weight("Wv", [8, 8])])])
    h = b.op("Add", [x, b.op("Identity", [ctx_])])
    mean = b.reduce_mean(h, [-1])
    d = b.op("Sub", [h, mean])
    var = b.reduce_mean(b.op("Pow", [d, b.floats(2.0)]), [-1])
    n = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [var, b.floats(1e-5)])])])
    n = b.op("Add", [b.op("Mul", [n, b.weight("gamma", [8])]), b.weight("beta", [8])])
    f = _erf_gelu(b, b.op("Add", [b.op("MatMul", [n, b.weight("W1", [8, 16])]), b.weight("b1", [16])]))
    y = b.op("Add", [n, b.op("MatMul", [f, b.weight("W2", [16, 8])])], "y")
    return b.model({"x": [1, 5, 8]}, [y])


@pytest.mark.parametrize("opset", OPSETS)
def test_bert_like_block(opset: int) -> None:
    model = bert_like_block(opset)
    graph = import_and_simplify(model)
    ops = [n.op for n in graph.nodes]
    assert "Gelu" in ops and "Erf" not in ops
    assert not {"Identity", "Dropout", "Constant", "Shape"} & set(ops)
    assert_matches_ort(model, graph, seed=opset)


def _constants(graph: Graph) -> list[np.ndarray]:
    """Constant data in the order nodes first read it (the order `print_graph` lists them)."""
    names = dict.fromkeys(i for n in graph.nodes for i in n.inputs)
    return [d for d in (graph.values[n].data for n in names) if d is not None]


def _check_data_equal(a: Graph, b: Graph) -> None:
    for x, y in zip(_constants(a), _constants(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6)


@pytest.mark.parametrize("build", [pytorch_legacy_cnn, tensorflow_cnn, bert_like_block])
def test_same_graph_at_every_opset(build: Callable[[int], onnx.ModelProto]) -> None:
    shapes = (
        {"x": (2, 8, 8, 3)} if build is tensorflow_cnn else SHAPES if build is pytorch_legacy_cnn else None
    )
    graphs = [import_and_simplify(build(opset), shapes) for opset in OPSETS]
    texts = [print_graph(g, rename=True) for g in graphs]
    assert texts[0] == texts[1] == texts[2]
    for g in graphs[1:]:
        _check_data_equal(graphs[0], g)


assert NEWEST >= 20  # the Gelu and HardSwish op spellings above exist at the newest opset
