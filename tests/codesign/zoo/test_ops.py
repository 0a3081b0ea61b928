"""The numpy value a GraphWriter records for each written node is what onnxruntime computes for it."""

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from codesign.zoo import numeric, ops
from codesign.zoo.writer import GraphWriter, Value

RNG = np.random.default_rng(0)


def _check(g: GraphWriter, inputs: dict[str, np.ndarray], out: Value, atol: float = 1e-5) -> None:
    """Run the one-output graph in onnxruntime on each sample of the batch and compare."""
    g.output(out, "y")
    m = g.to_model(doc="test", metadata={})
    onnx.checker.check_model(m, full_check=True)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for i in range(len(next(iter(inputs.values())))):
        (got,) = session.run(None, {k: v[i : i + 1] for k, v in inputs.items()})
        np.testing.assert_allclose(got[0], out.data[i], rtol=1e-5, atol=atol)


def _image(channels: int, size: int) -> np.ndarray:
    return RNG.standard_normal((2, channels, size, size)).astype(np.float32)


@pytest.mark.parametrize(("cin", "cout", "size", "kernel", "stride", "pad", "group"), [
    (3, 8, 15, 7, 2, 3, 1), (4, 6, 9, 3, 1, 1, 1), (5, 3, 8, 1, 2, 0, 1), (6, 6, 9, 3, 2, 1, 6),
    (4, 4, 7, 3, 1, 1, 4),
])
def test_conv(cin, cout, size, kernel, stride, pad, group):
    g = GraphWriter("t", 20)
    x = g.input("x", _image(cin, size))
    w = g.param("w", RNG.standard_normal((cout, cin // group, kernel, kernel)).astype(np.float32))
    b = g.param("b", RNG.standard_normal(cout).astype(np.float32))
    _check(g, {"x": x.data}, ops.conv(g, x, w, b, name="c", stride=stride, pad=pad, group=group), atol=1e-4)


def test_grouped_conv_other_than_depthwise_is_refused():
    with pytest.raises(ValueError, match="group 1 or depthwise, not group 2 on 4 channels"):
        numeric.conv2d(_image(4, 5), np.ones((4, 2, 3, 3), np.float32), None, stride=1, pad=1, group=2)


@pytest.mark.parametrize(("kernel", "stride", "pad"), [(3, 2, 1), (2, 2, 0)])
def test_max_pool_padding_never_wins(kernel, stride, pad):
    g = GraphWriter("t", 20)
    x = g.input("x", _image(3, 9) - 10.0)  # all negative: zero padding would win
    _check(g, {"x": x.data}, ops.max_pool(g, x, name="p", kernel=kernel, stride=stride, pad=pad))


def test_batch_norm_relu_pool_flatten_gemm_chain():
    g = GraphWriter("t", 9)
    x = g.input("x", _image(4, 6))
    params = [g.param(n, RNG.uniform(0.5, 1.5, 4).astype(np.float32)) for n in ("g", "b", "m", "v")]
    y = ops.relu(g, ops.batch_norm(g, x, *params, name="bn"), name="r")
    y = ops.flatten(g, ops.global_average_pool(g, y, name="gap"), name="f")
    w, b = g.param("w", RNG.standard_normal((3, 4)).astype(np.float32)), g.param("bb", np.ones(3, np.float32))
    _check(g, {"x": x.data}, ops.gemm(g, y, w, b, name="fc"))


def test_attention_pieces():
    g = GraphWriter("t", 20)
    x = g.input("x", RNG.standard_normal((2, 5, 8)).astype(np.float32))
    gamma, beta = g.param("g", np.full(8, 1.2, np.float32)), g.param("b", np.full(8, 0.1, np.float32))
    y = ops.layer_norm(g, x, gamma, beta, name="ln")
    y = ops.transpose(g, ops.reshape(g, y, [1, 5, 2, 4], name="split"), (0, 2, 1, 3), name="heads")
    y = ops.softmax(g, ops.matmul(g, y, ops.transpose(g, y, (0, 1, 3, 2), name="t"), name="s"), name="sm")
    _check(g, {"x": x.data}, ops.tanh(g, y, name="th"))


@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_operator_and_erf_form(opset):
    g = GraphWriter("t", opset)
    x = g.input("x", (RNG.standard_normal((2, 50)) * 3).astype(np.float32))
    y = ops.gelu(g, x, name="gelu")
    assert ("Gelu" in [n.op_type for n in g.to_model(doc="", metadata={}).graph.node]) == (opset >= 20)
    _check(g, {"x": x.data}, y)


def test_erf_is_accurate_to_float32():
    x = np.linspace(-5, 5, 1001)
    exact = np.array([math.erf(v) for v in x])
    assert np.abs(numeric.erf(x) - exact).max() < 3e-7


def test_mask_bias_pieces():
    g = GraphWriter("t", 17)
    mask = g.input("m", np.array([[1, 1, 0], [1, 0, 0]], np.int64))
    y = ops.cast_float(g, ops.unsqueeze(g, mask, [1, 2], name="u"), name="c")
    y = ops.sub(g, g.constant(np.float32(1.0)), y, name="s")
    y = ops.mul(g, y, g.constant(np.float32(-5.0)), name="m2")
    table = g.param("table", RNG.standard_normal((4, 3)).astype(np.float32))
    y = ops.add(g, ops.gather(g, table, g.constant(np.array([[0, 3, 1]], np.int64)), name="ga"), y, name="a")
    _check(g, {"m": mask.data}, ops.div(g, y, g.constant(np.float32(2.0)), name="d"))


def test_reshape_keeps_the_batch_of_one():
    g = GraphWriter("t", 20)
    x = g.input("x", np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="reshape r: axis 0 must be the batch of 1, not 2"):
        ops.reshape(g, x, [2, 2], name="r")


def test_round_significant_keeps_ten_bits():
    x = np.array([1.0, 3.14159265, -1234.5678, 1e-8], np.float64)
    rounded = numeric.round_significant(x)
    assert rounded.dtype == np.float32 and rounded[0] == 1.0
    assert np.all(np.abs(rounded - x) <= np.abs(x) * 2.0**-10)
