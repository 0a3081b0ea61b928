"""Transpose, Gather, Cast, Sub, Div, MatMul and a float stem's Conv, Clip and Relu nodes of a
model run as native host kernels (`where == "host"`) with the graph interpreter's results; Gemm
and Tanh, held back from the runtime's mappings (compiler.runtime.cpu.HELD_BACK), run natively
when mapped; so do QConv and QGemm with the precise requantization of a QDQ import."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_onnx
from compiler.graph import const, verify
from compiler.graph.builder import append
from compiler.graph.interp import run_graph
from compiler.graph.ir import Graph
from compiler.quant.requant import precise_requant
from compiler.runtime.model import CompiledModel
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from sim.backends import make_backend

CFG = PRESETS["tiny"]
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
I8, BOOL = TensorProto.INT8, TensorProto.BOOL


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list[int]]], outputs: list[str],
           initializers: dict[str, np.ndarray] | None = None) -> Graph:
    graph = helper.make_graph(
        nodes, "host_ops", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    return import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        v = graph.values[name]
        if v.dtype == "float32":
            feeds[name] = rng.standard_normal(v.shape).astype(np.float32)
        else:
            feeds[name] = rng.integers(-5, 6, v.shape).astype(v.dtype)
    return feeds


Arrays = dict[str, np.ndarray]


def _run(graph: Graph, feeds: Arrays, ops: set[str]) -> tuple[Arrays, Arrays]:
    """The compiled model's outputs and the interpreter's; every node of `ops` ran natively."""
    model = CompiledModel.compile(graph, AcceleratorTarget(CFG))
    result = model.run(feeds, make_backend("fsim", CFG))
    wheres = [(r.op, r.where) for r in result.steps]
    assert {op for op, _ in wheres} >= ops, wheres
    assert all(where == "host" for op, where in wheres if op in ops), wheres
    return result.outputs, run_graph(graph, feeds)


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape
        assert np.array_equal(got[name], w), name


def test_bert_attention_heads_run_natively():
    """bert-tiny's self-attention: split heads (Transpose), Q K^T (MatMul), scale (Div), mask
    (Cast, Sub, Mul, Add), softmax, context (MatMul), merge heads (Transpose)."""
    s, h, d = 8, 2, 4
    nodes = [
        helper.make_node("Transpose", ["q"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v"], ["vh"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
        helper.make_node("Cast", ["mask"], ["maskf"], to=F),
        helper.make_node("Sub", ["one", "maskf"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "big"], ["fill"]),
        helper.make_node("Add", ["scaled", "fill"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "vh"], ["context"]),
        helper.make_node("Transpose", ["context"], ["y"], perm=[0, 2, 1, 3]),
    ]
    consts = {"sqrt_d": np.array(2.0, np.float32), "one": np.array(1.0, np.float32),
              "big": np.array(-10000.0, np.float32)}
    graph = _model(nodes, {"q": (F, [1, s, h, d]), "k": (F, [1, s, h, d]), "v": (F, [1, s, h, d]),
                           "mask": (I64, [1, 1, 1, s])}, ["y"], consts)
    feeds = _feeds(graph)
    feeds["mask"] = np.array([[[[1, 1, 1, 1, 1, 0, 0, 1]]]], np.int64)
    got, want = _run(graph, feeds, {"Transpose", "MatMul", "Div", "Cast", "Sub"})
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 1, 2]])
def test_transpose(perm):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=perm)]
    graph = _model(nodes, {"x": (F, [3, 5, 7])}, ["y"])
    _assert_same(*_run(graph, _feeds(graph), {"Transpose"}))


def test_gather_embedding_and_first_token():
    table = np.random.default_rng(1).standard_normal((11, 6)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
             helper.make_node("Gather", ["emb", "first"], ["y"], axis=1)]
    consts = {"table": table, "first": np.array(0, np.int64)}
    graph = _model(nodes, {"ids": (I64, [1, 5])}, ["emb", "y"], consts)
    feeds = {"ids": np.array([[0, 10, -1, 3, -11]], np.int64)}
    got, want = _run(graph, feeds, {"Gather"})
    _assert_same(got, want)
    assert got["y"].shape == (1, 6) and np.array_equal(got["y"][0], table[0])


@pytest.mark.parametrize("chain", [(I64, F), (F, I32), (F, I8), (F, BOOL), (I32, BOOL)])
def test_cast(chain):
    src, dst = chain
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Cast", ["n"], ["y"], to=dst)]
    graph = _model(nodes, {"x": (src, [2, 9])}, ["y"])
    feeds = _feeds(graph)
    if src == F:
        feeds["x"] = (feeds["x"] * 40).astype(np.float32)  # inside int8's range, truncated
        feeds["x"][0, :3] = [0.0, -0.0, 2.5]
    _assert_same(*_run(graph, feeds, {"Cast"}))


@pytest.mark.parametrize("dtype", [F, I32])
def test_sub_and_div_broadcast(dtype):
    nodes = [helper.make_node("Sub", ["a", "b"], ["d"]), helper.make_node("Div", ["d", "c"], ["y"])]
    graph = _model(nodes, {"a": (dtype, [2, 1, 5]), "b": (dtype, [3, 1]), "c": (dtype, [5])}, ["y"])
    feeds = _feeds(graph, seed=3)
    if dtype == I32:
        feeds["c"] = np.array([2, -3, 4, -1, 7], np.int32)  # no zero divisor (numpy warns)
    _assert_same(*_run(graph, feeds, {"Sub", "Div"}))


def test_batched_matmul_broadcasts():
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    graph = _model(nodes, {"a": (F, [2, 1, 5, 7]), "b": (F, [3, 7, 9])}, ["y"])
    got, want = _run(graph, _feeds(graph), {"MatMul"})
    assert got["y"].shape == (2, 3, 5, 9)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


def test_nodes_outside_the_kernels_stay_with_the_interpreter():
    nodes = [helper.make_node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
             helper.make_node("Transpose", ["d"], ["t"], perm=[1, 0]),
             helper.make_node("Cast", ["t"], ["y"], to=F)]
    graph = _model(nodes, {"x": (F, [2, 3])}, ["y"])
    model = CompiledModel.compile(graph, AcceleratorTarget(CFG))
    assert [s.where for s in model.steps] == ["host-numpy"] * 3  # float64 has no host kernel


def test_gemm_and_tanh_run_natively():
    rng = np.random.default_rng(2)
    w, b = rng.standard_normal((3, 16)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("Tanh", ["x"], ["t"]),
             helper.make_node("Gemm", ["t", "w", "b"], ["y"], transB=1)]
    graph = _model(nodes, {"x": (F, [1, 16])}, ["y"], {"w": w, "b": b})
    got, want = _run(graph, _feeds(graph), {"Gemm", "Tanh"})
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)


def test_float_stem_convolutions_and_activations_run_natively():
    """The stems the quantizer keeps in float: ResNet-18's (7x7, stride 2, pads 3, bias) -> Relu,
    MobileNetV2's (3x3, stride 2, TensorFlow's asymmetric pads) -> Clip(0, 6); then a depthwise
    and a grouped Conv without bias.  The Convs agree with the interpreter's within float32
    rounding (another summation order); Clip and Relu are bit for bit
    (tests/compiler/ops/cpu/test_unary_clip.py)."""
    rng = np.random.default_rng(4)
    consts = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in (
        ("w1", (16, 3, 7, 7)), ("b1", (16,)), ("w2", (8, 3, 3, 3)), ("b2", (8,)), ("w3", (8, 1, 3, 3)),
        ("w4", (4, 4, 3, 3)))}
    consts |= {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[3, 3, 3, 3]),
             helper.make_node("Relu", ["c1"], ["r"]),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], strides=[2, 2], pads=[0, 0, 1, 1]),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["c6"]),
             helper.make_node("Conv", ["c6", "w3"], ["d"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("Conv", ["d", "w4"], ["y"], pads=[0, 1, 2, 2], group=2)]
    graph = _model(nodes, {"x": (F, [1, 3, 16, 16])}, ["r", "y"], consts)
    got, want = _run(graph, _feeds(graph), {"Conv", "Relu", "Clip"})
    assert got["r"].shape == (1, 16, 8, 8) and got["y"].shape == (1, 4, 8, 9)
    for name in ("r", "y"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-4)


def test_dilated_convolution_and_integer_relu_stay_with_the_interpreter():
    w = np.random.default_rng(5).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], dilations=[2, 2]),
             helper.make_node("Relu", ["q"], ["r"])]
    graph = _model(nodes, {"x": (F, [1, 3, 9, 9]), "q": (I8, [2, 7])}, ["y", "r"], {"w": w})
    model = CompiledModel.compile(graph, AcceleratorTarget(CFG))
    assert [(s.node.op, s.where) for s in model.steps] == [("Conv", "host-numpy"), ("Relu", "host-numpy")]
    got, want = _run(graph, _feeds(graph), set())
    _assert_same(got, want)


def _qnode(g: Graph, op: str, inputs: list[str], weight: np.ndarray, attrs: dict[str, object], out: str,
           precise: bool, seed: int) -> None:
    """Append a QConv/QGemm reading `inputs[0]` with `weight`, seeded biases, and multipliers (and
    clamp bounds: precise) from seeded ratios as a QDQ import makes them; `inputs[1:]` follow mult."""
    rng = np.random.default_rng(seed)
    k, taps = weight.shape[0], weight[0].size
    consts = {"w": weight, "b": rng.integers(-(2**12), 2**12, k).astype(np.int32)}
    reals = rng.uniform(0.5, 2.0, k) * 48 / (5500 * np.sqrt(taps))  # outputs mostly within int8
    if precise:
        p = precise_requant(reals, (-128, 127), out)
        consts |= {"m": p.mult, "lo": p.clamp_lo, "hi": p.clamp_hi}
        attrs = attrs | {"shift": p.shift, "split": p.split}
    else:
        consts["m"] = np.rint(reals * 2**20).astype(np.int32)
        attrs = attrs | {"shift": 20}
    for name, array in consts.items():
        g.add_value(const(f"{out}.{name}", array))
    names = [f"{out}.{name}" for name in consts]
    append(g, op, [inputs[0], *names[:4], *inputs[1:], *names[4:]], [out], attrs)


def test_precise_quantized_convolutions_and_dense_layers_run_natively():
    """A QDQ import's QConv (ResNet-18's stem, a depthwise one) and QGemm requantize precisely
    (split > 0, clamp_lo and clamp_hi after mult): native kernels, bit for bit; so does a QConv
    with a fused residual (five inputs: qconv2d's residual)."""
    rng = np.random.default_rng(6)
    g = Graph()
    g.add_input("x", (1, 3, 16, 16), "int8")
    g.add_input("v", (2, 40), "int8")

    def weight(*shape: int) -> np.ndarray:
        return rng.integers(-128, 128, shape).astype(np.int8)

    _qnode(g, "QConv", ["x"], weight(8, 3, 7, 7), {"strides": (2, 2), "pads": (3, 3, 3, 3)}, "stem", True, 1)
    _qnode(g, "QConv", ["stem"], weight(8, 1, 3, 3), {"strides": (1, 1), "pads": (1, 1, 1, 1), "group": 8},
           "dw", True, 2)
    _qnode(g, "QConv", ["dw", "stem"], weight(8, 8, 1, 1), {"strides": (1, 1), "pads": (0, 0, 0, 0),
                                                            "mult_r": 3000}, "res", False, 3)
    _qnode(g, "QGemm", ["v"], weight(10, 40), {}, "fc", True, 4)
    _qnode(g, "QGemm", ["v"], weight(10, 40), {}, "plain_fc", False, 5)
    g.outputs = ["dw", "res", "fc", "plain_fc"]
    verify(g)
    model = CompiledModel.compile(g, AcceleratorTarget(CFG), offload=False)
    wheres = {s.node.outputs[0]: s.where for s in model.steps}
    assert wheres == {"stem": "host", "dw": "host", "res": "host", "fc": "host", "plain_fc": "host"}
    feeds = {"x": weight(1, 3, 16, 16), "v": weight(2, 40)}
    got = model.run(feeds, make_backend("fsim", CFG)).outputs
    want = run_graph(g, feeds)
    _assert_same(got, want)
    assert all(len(np.unique(want[name])) > 16 for name in g.outputs)  # not all clipped


@pytest.mark.parametrize(("op", "attrs"), [("Softmax", {"axis": 1}), ("Gelu", {})])
def test_float64_last_axis_ops_stay_in_the_interpreter(op: str, attrs: dict[str, object]) -> None:
    """The native softmax/gelu kernels take float32 only (ONNX's suite has float64 softmaxes)."""
    from compiler.runtime.cpu import host_spec

    g = Graph()
    g.add_input("x", (2, 3), "float64")
    node = append(g, op, ["x"], ["y"], attrs, "n")
    assert host_spec(g, node) is None
    g32 = Graph()
    g32.add_input("x", (2, 3), "float32")
    assert host_spec(g32, append(g32, op, ["x"], ["y"], attrs, "n")) is not None


def test_elementwise_and_int8_convolution_kernels_compile_at_o2_and_other_sums_at_o3():
    """O3 only unrolls the short loops of element-wise kernels (5-10x the compile time) and costs
    int8 convolutions half again the compile time for little speed; other kernels with sums stay
    at O3 (compiler.runtime.cpu.O2_OPS)."""
    from compiler.runtime.cpu import opt_level_of

    o2 = ("pack", "unpack", "quantize", "dequantize", "clip", "qconv2d")
    assert [opt_level_of(n) for n in o2] == [2] * 6
    assert [opt_level_of(n) for n in ("conv2d", "gemm", "qgemm", "global_avg_pool2d")] == [3] * 4
