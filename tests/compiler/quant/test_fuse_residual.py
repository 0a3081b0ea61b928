"""Residual additions fused into the convolution before them: which pairs fuse, that the fused
op's multipliers stand for the product of the two requantizations, that nothing wraps, and that
the fused graph stays as close to the float model as the unfused one."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const
from compiler.graph.builder import append
from compiler.graph.interp import run_graph
from compiler.quant import quantize
from compiler.quant.check import wrap_margins
from compiler.quant.fuse_residual import fuse_residual_adds
from tests.compiler.quant.graphs import inputs, small_cnn


def _residual_block(relu_before_add: bool = False, second_reader: bool = False, seed: int = 0) -> Graph:
    """x -> conv+relu (r1) -> conv (c2) -> add(c2, r1) -> relu (a1) -> conv -> y; optionally a
    ReLU on c2 before the add, or c2 also a graph output."""
    rng = np.random.default_rng(seed)
    g = Graph("block")
    g.add_input("x", (1, 16, 8, 8), "float32")
    conv = {"strides": (1, 1), "pads": (1,) * 4, "dilations": (1, 1), "group": 1}
    for name, scale in (("w1", 0.15), ("w2", 0.1), ("w3", 0.1)):
        g.add_value(const(name, (rng.standard_normal((16, 16, 3, 3)) * scale).astype(np.float32)))
    for name in ("b1", "b2", "b3"):
        g.add_value(const(name, (rng.standard_normal(16) * 0.1).astype(np.float32)))
    append(g, "Conv", ["x", "w1", "b1"], ["c1"], conv)
    append(g, "Relu", ["c1"], ["r1"])
    append(g, "Conv", ["r1", "w2", "b2"], ["c2"], conv)
    main = "c2"
    if relu_before_add:
        append(g, "Relu", ["c2"], ["c2r"])
        main = "c2r"
    append(g, "Add", [main, "r1"], ["a"])
    append(g, "Relu", ["a"], ["a1"])
    append(g, "Conv", ["a1", "w3", "b3"], ["y"], conv)
    g.outputs = ["y", "c2"] if second_reader else ["y"]
    return g


def _quantized(g: Graph) -> Graph:
    return quantize(g, inputs(g, 8, 100))


def _fused_nodes(g: Graph) -> list[str]:
    return [n.name for n in g.nodes if n.op == "QConv" and len(n.inputs) == 5]


def test_conv_then_add_becomes_one_conv_with_a_residual():
    q = _quantized(_residual_block())
    fused = fuse_residual_adds(q)
    assert [n.op for n in q.nodes].count("QAdd") == 1
    assert [n.op for n in fused.nodes].count("QAdd") == 0
    (name,) = _fused_nodes(fused)
    node = next(n for n in fused.nodes if n.name == name)
    add = next(n for n in q.nodes if n.op == "QAdd")
    conv = next(n for n in q.nodes if n.outputs == ("c2",))  # the later of the two convs it reads
    assert node.name == f"{conv.name}+{add.name}" and node.outputs == add.outputs
    assert node.inputs[4] in add.inputs and node.inputs[4] != conv.outputs[0]
    for bound in ("clip_lo", "clip_hi"):
        assert node.int_attr(bound) == add.int_attr(bound)
    # the fused multipliers stand for the product of the two requantizations
    mult_c = add.int_attr("mult_a") if add.inputs[0] == conv.outputs[0] else add.int_attr("mult_b")
    mult_r = add.int_attr("mult_b") if add.inputs[0] == conv.outputs[0] else add.int_attr("mult_a")
    m1, m = q.const_data(conv.inputs[3]), fused.const_data(node.inputs[3])
    assert m1 is not None and m is not None
    want = m1 * float(mult_c) / 2.0 ** (conv.int_attr("shift") + add.int_attr("shift"))
    np.testing.assert_allclose(m / 2.0 ** node.int_attr("shift"), want, rtol=2.0 / np.abs(m).min())
    want_r = mult_r / 2.0 ** add.int_attr("shift")
    assert node.int_attr("mult_r") / 2.0 ** node.int_attr("shift") == pytest.approx(want_r, rel=1e-6)


def test_fused_graph_tracks_the_float_model_as_closely_and_never_wraps():
    g = _residual_block(seed=3)
    q = _quantized(g)
    fused = fuse_residual_adds(q)
    xs = inputs(g, 6, 7)
    for x in xs:
        want = run_graph(g, x)["y"]
        got_fused, got_plain = (run_graph(graph, x)["y"] for graph in (fused, q))
        # one rounding fewer: on average no further from the float model than the unfused graph
        assert np.abs(got_fused - want).mean() <= np.abs(got_plain - want).mean() * 1.05 + 1e-9
    # inputs three times as large as any calibration input: still nothing near a wrap
    margins = wrap_margins(fused, [{"x": 3 * x["x"]} for x in xs])
    assert 0 < margins[_fused_nodes(fused)[0]] < 1


def test_fusion_keeps_a_relu_before_the_add_and_a_conv_output_read_twice():
    for graph in (_residual_block(relu_before_add=True), _residual_block(second_reader=True)):
        q = _quantized(graph)
        assert _fused_nodes(fuse_residual_adds(q)) == []


def test_small_cnn_fuses_its_residual_and_computes_the_same_classes():
    g = small_cnn()
    q = quantize(g, inputs(g, 8, 100))
    fused = fuse_residual_adds(q)
    assert len(_fused_nodes(fused)) == 1
    for x in inputs(g, 4, 5):
        a, b = run_graph(q, x)["logits"], run_graph(fused, x)["logits"]
        assert np.abs(a - b).max() <= 0.05 * np.abs(a).max()
