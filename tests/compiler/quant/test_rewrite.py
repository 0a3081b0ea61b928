"""The rewrite with hand-set scales: printed results derived by hand, and each fusion's limits."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const, print_graph, run_graph
from compiler.graph.builder import append
from compiler.quant import Plan, codings, rewrite


def _graph(*inputs: tuple[str, tuple[int, ...]]) -> Graph:
    g = Graph("t")
    for name, shape in inputs:
        g.add_input(name, shape, "float32")
    return g


def _body(g: Graph) -> list[str]:
    return [line for line in print_graph(g).splitlines()[1:] if not line.lstrip().startswith("const")]


def test_residual_add_and_relu_fold_into_qadd() -> None:
    g = _graph(("a", (1, 4)), ("b", (1, 4)))
    append(g, "Add", ["a", "b"], ["s"])
    append(g, "Relu", ["s"], ["r"])
    append(g, "Tanh", ["r"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"a": 0.5, "b": 0.25, "s": 2.0, "r": 1.0})))
    # ratios 0.5 and 0.25: 0.5 * 2**16 = 32768 overflows 16 bits, so shift 15
    assert _body(q) == [
        "  a.q: int8[1,4] = Quantize(a) scale=0.5 zero_point=0",
        "  b.q: int8[1,4] = Quantize(b) scale=0.25 zero_point=0",
        "  r: int8[1,4] = QAdd(a.q, b.q) clip_hi=127 clip_lo=0 mult_a=16384 mult_b=8192 out_scale=1.0 "
        "shift=15",
        "  r.dq: float32[1,4] = Dequantize(r) scale=1.0",
        "  y: float32[1,4] = Tanh(r.dq)",
    ]
    a = np.array([[1.0, -3.0, 2.0, 0.5]], np.float32)
    b = np.array([[0.25, 0.5, -1.0, 0.0]], np.float32)
    # a/0.5 = [2, -6, 4, 1], b/0.25 = [1, 2, -4, 0]; (2*16384 + 1*8192 + 2**14) >> 15 = 1 (1.25 -> 1);
    # -2.5 -> ReLU 0; 4*16384 - 4*8192 = 2**15 -> 1; 1*16384 + 2**14 = 2**15 -> 1 (0.5 rounds up)
    np.testing.assert_allclose(
        run_graph(q, {"a": a, "b": b})["y"], np.tanh([[1.0, 0.0, 1.0, 1.0]]), rtol=1e-6
    )


def test_conv_bias_and_relu6_fold_into_qconv_with_hand_derived_parameters() -> None:
    g = _graph(("x", (1, 1, 2, 2)))
    g.add_value(const("w", np.array([1.27, -0.635], np.float32).reshape(2, 1, 1, 1)))
    g.add_value(const("b", np.array([0.5, -0.25], np.float32)))
    attrs = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1}
    append(g, "Conv", ["x", "w", "b"], ["c"], attrs)
    append(g, "Clip", ["c"], ["r"], {"min": 0.0, "max": 6.0})
    append(g, "Sigmoid", ["r"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"x": 0.1, "r": 0.2})))
    # w_scale = [0.01, 0.005], weights [127, -127]; bias / (0.1 * w_scale) = [500, -500];
    # ratios 0.1 * w_scale / 0.2 = [0.005, 0.0025]; bound 128 * 127 + 500 = 16756 (below the
    # data-free 2048 / ratio): 16756 * round(0.005 * 2**24) + 2**23 < 2**31, 2**25 would not fit;
    # Clip(0, 6) at 0.2 is [0, 30]
    np.testing.assert_array_equal(q.const_data("w.q").ravel(), [127, -127])
    np.testing.assert_array_equal(q.const_data("c.bias"), [500, -500])
    np.testing.assert_array_equal(q.const_data("c.mult"), [83886, 41943])
    assert _body(q)[1] == (
        "  r: int8[1,2,2,2] = QConv(x.q, w.q, c.bias, c.mult) clip_hi=30 clip_lo=0 group=1 mult_r=0 "
        "out_scale=0.2 pad_value=0 pads=[0,0,0,0] shift=24 split=0 strides=[1,1]"
    )
    x = np.array([[[[10.0, -10.0], [3.0, 0.0]]]], np.float32)
    out = run_graph(q, {"x": x})["y"]
    # channel 0: 1.27 x + 0.5 = [13.2, -12.2, 4.31, 0.5] -> clip 6 -> / 0.2 -> [30, 0, 21.55, 2.5]
    ref = np.clip(1.27 * x[0, 0] + 0.5, 0, 6)
    np.testing.assert_allclose(1 / (1 + np.exp(-ref)), out[0, 0], atol=0.2 * 0.5 * 0.25 + 1e-6)


def test_an_activation_with_another_user_of_its_input_stays_separate() -> None:
    g = _graph(("x", (1, 2, 3, 3)))
    g.add_value(const("w", np.ones((2, 2, 1, 1), np.float32)))
    append(
        g, "Conv", ["x", "w"], ["c"], {"strides": (1, 1), "pads": (0,) * 4, "dilations": (1, 1), "group": 1}
    )
    append(g, "Relu", ["c"], ["r"])
    append(g, "Add", ["c", "r"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"x": 0.1, "c": 0.1, "r": 0.1, "y": 0.2})))
    ops = [n.op for n in q.nodes]
    assert ops == ["Quantize", "QConv", "Relu", "QAdd", "Dequantize"]
    conv = q.nodes[1]
    assert (conv.int_attr("clip_lo"), conv.int_attr("clip_hi")) == (-128, 127)  # no ReLU folded
    assert q.nodes[2].inputs == ("c",)  # the int8 Relu reads the int8 conv output: same scale


@pytest.mark.parametrize(
    "lo,hi,bounds", [(-1.0, 1.0, (-10, 10)), (0.25, 100.0, (2, 127)), (-np.inf, 0.05, (-128, 0))]
)
def test_clip_bounds_round_like_quantize(lo: float, hi: float, bounds: tuple[int, int]) -> None:
    g = _graph(("a", (1, 3)), ("b", (1, 3)))
    append(g, "Add", ["a", "b"], ["s"])
    append(g, "Clip", ["s"], ["y"], {"min": lo, "max": hi})
    append(g, "Neg", ["y"], ["z"])
    g.outputs = ["z"]
    q = rewrite(g, Plan(codings({"a": 0.1, "b": 0.1, "y": 0.1})))
    add = next(n for n in q.nodes if n.op == "QAdd")
    # 0.25 / 0.1 = 2.5 rounds half to even: 2; 0.05 / 0.1 = 0.5 -> 0
    assert (add.int_attr("clip_lo"), add.int_attr("clip_hi")) == bounds


def test_float_ops_get_dequantize_and_quantize_once_per_value() -> None:
    g = _graph(("a", (1, 4)), ("b", (1, 4)))
    append(g, "Add", ["a", "b"], ["s"])
    append(g, "Softmax", ["s"], ["p"], {"axis": 1})
    append(g, "Exp", ["s"], ["e"])
    append(g, "Add", ["p", "e"], ["t"])
    append(g, "Add", ["t", "s"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"a": 0.1, "b": 0.1, "s": 0.1, "p": 0.01, "e": 0.1, "t": 0.1, "y": 0.1})))
    ops = [n.op for n in q.nodes]
    assert ops.count("Dequantize") == 2  # s once (for Softmax and Exp), y at the end
    assert ops.count("Quantize") == 4  # a, b, p, e
    assert ops == [
        *("Quantize", "Quantize", "QAdd", "Dequantize", "Softmax", "Exp"),
        *("Quantize", "Quantize", "QAdd", "QAdd", "Dequantize"),
    ]


def test_broadcast_adds_and_values_without_scales_stay_float() -> None:
    g = _graph(("a", (2, 4)), ("b", (1, 4)))
    append(g, "Add", ["a", "b"], ["s"])
    append(g, "Relu", ["s"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"a": 0.1, "b": 0.1, "s": 0.1, "y": 0.1})))
    assert [n.op for n in q.nodes] == ["Add", "Relu"]


def test_matmul_by_a_constant_with_bias_becomes_qgemm_on_flattened_rows() -> None:
    g = _graph(("x", (1, 3, 4)))
    rng = np.random.default_rng(0)
    g.add_value(const("w", rng.standard_normal((4, 5)).astype(np.float32)))
    g.add_value(const("bias", rng.standard_normal(5).astype(np.float32)))
    append(g, "MatMul", ["x", "w"], ["m"])
    append(g, "Add", ["m", "bias"], ["d"])
    append(g, "Gelu", ["d"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"x": 0.02, "d": 0.05})))
    shift = next(n for n in q.nodes if n.op == "QGemm").int_attr("shift")
    assert _body(q)[1:4] == [
        "  x.2d: int8[3,4] = Reshape(x.q) shape=[3,4]",
        f"  d.2d: int8[3,5] = QGemm(x.2d, w.q, d.bias, d.mult) clip_hi=127 clip_lo=-128 out_scale=0.05 "
        f"shift={shift} split=0",
        "  d: int8[1,3,5] = Reshape(d.2d) shape=[1,3,5]",
    ]
    assert q.values["w.q"].shape == (5, 4)  # output channels first
    x = rng.uniform(-2, 2, (1, 3, 4)).astype(np.float32)
    ref = run_graph(g, {"x": x})["y"]
    np.testing.assert_allclose(run_graph(q, {"x": x})["y"], ref, atol=0.1)


def test_global_pools_become_qglobalavgpool() -> None:
    g = _graph(("x", (1, 2, 4, 4)))
    append(g, "ReduceMean", ["x"], ["m"], {"axes": (2, 3), "keepdims": 0})
    append(g, "Neg", ["m"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"x": 0.1, "m": 0.05})))
    # ratio 0.1 / (16 * 0.05) = 0.125: 0.125 * 2**18 = 32768 overflows 16 bits -> shift 17
    assert _body(q)[1:3] == [
        "  m.pool: int8[1,2,1,1] = QGlobalAvgPool(x.q) clip_hi=127 clip_lo=-128 mult=16384 out_scale=0.05 "
        "shift=17",
        "  m: int8[1,2] = Reshape(m.pool) shape=[1,2]",
    ]
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4) / 10.0
    np.testing.assert_allclose(run_graph(q, {"x": x})["y"], -x.mean(axis=(2, 3)), atol=0.05 / 2 + 1e-6)


def test_graph_outputs_keep_their_names_and_float_type() -> None:
    g = _graph(("a", (1, 4)), ("b", (1, 4)))
    append(g, "Add", ["a", "b"], ["y"])
    g.outputs = ["y"]
    q = rewrite(g, Plan(codings({"a": 0.1, "b": 0.1, "y": 0.1})))
    assert _body(q)[-2:] == [
        "  y.q: int8[1,4] = QAdd(a.q, b.q) clip_hi=127 clip_lo=-128 mult_a=16384 mult_b=16384 out_scale=0.1 "
        "shift=14",
        "  y: float32[1,4] = Dequantize(y.q) scale=0.1",
    ]
    assert q.outputs == ["y"] and q.values["y"].dtype == "float32"


def test_lowering_leaves_its_input_graph_alone() -> None:
    g = _graph(("a", (1, 4)), ("b", (1, 4)))
    append(g, "Add", ["a", "b"], ["y"])
    g.outputs = ["y"]
    before = print_graph(g)
    rewrite(g, Plan(codings({"a": 0.1, "b": 0.1, "y": 0.1})))
    assert print_graph(g) == before
