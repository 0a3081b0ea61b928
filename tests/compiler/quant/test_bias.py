"""Empirical bias correction: each corrected layer's mean pre-activation on the calibration
inputs is the float graph's, to within half an accumulator step; the integer ops are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, run_graph
from compiler.graph.opdefs.qops import conv_acc
from compiler.graph.passes import simplify
from compiler.quant import QuantizationError, quantize
from compiler.quant.bias import _channel_mean
from compiler.quant.calibrate import collect
from compiler.quant.plan import Plan, codings
from compiler.quant.rewrite import rewrite
from compiler.quant.static import activation_scales
from tests.compiler.quant.graphs import inputs, small_cnn


def _lowered(correct: bool) -> tuple[Graph, list[dict[str, np.ndarray]], Graph]:
    g = simplify(small_cnn())
    feeds = inputs(g, 8, seed=1)
    cal = collect(g, feeds)
    plan = Plan(codings(activation_scales(g, cal, "minmax")), calibration=cal,
                correction_inputs=feeds if correct else ())
    return g, feeds, rewrite(g, plan)


def test_corrected_biases_match_the_float_means_and_nothing_else_changes() -> None:
    g, feeds, plain = _lowered(False)
    _, _, corrected = _lowered(True)
    assert [n.op for n in plain.nodes] == [n.op for n in corrected.nodes]
    pairs = [(n, m) for n, m in zip(plain.nodes, corrected.nodes, strict=True) if n.op == "QConv"]
    before_after = [(plain.const_data(n.inputs[2]), corrected.const_data(m.inputs[2])) for n, m in pairs]
    assert any(not np.array_equal(b, a) for b, a in before_after)  # some mean moved half a step
    first = corrected.nodes[[n.op for n in corrected.nodes].index("QConv")]
    assert first.inputs[0] == "x.q"  # the first conv reads the quantized input: check its mean
    float_mean = np.mean([run_graph(g, x, keep=["c1"])["c1"].mean(axis=(0, 2, 3)) for x in feeds], axis=0)
    acc = []
    for x in feeds:
        xq = run_graph(corrected, x, keep=["x.q"])["x.q"]
        w = corrected.const_data(first.inputs[1])
        acc.append(
            conv_acc(xq, w, first.ints_attr("strides"), first.ints_attr("pads"), first.int_attr("group"))
        )
    acc_mean = np.mean([a.mean(axis=(0, 2, 3)) for a in acc], axis=0) + corrected.const_data(first.inputs[2])
    x_scale = next(n for n in corrected.nodes if n.op == "Quantize").float_attr("scale")
    w_float = g.const_data(next(n for n in g.nodes if n.op == "Conv").inputs[1])
    assert w_float is not None
    w_scale = np.abs(w_float).reshape(8, -1).max(axis=1) / 127
    acc_scale = x_scale * w_scale.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(acc_mean, float_mean / acc_scale, atol=0.5 + 1e-6)


def test_quantize_corrects_biases_unless_told_not_to() -> None:
    feeds = inputs(small_cnn(), 8, seed=1)
    on, off = (quantize(small_cnn(), feeds, bias_correction=b) for b in (True, False))
    biases = [(on.const_data(n.inputs[2]), off.const_data(m.inputs[2]))
              for n, m in zip(on.nodes, off.nodes, strict=True) if n.op == "QConv"]
    assert any(not np.array_equal(a, b) for a, b in biases)


def test_channel_means_are_numpys_float64_means_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    lo, hi = -(1 << 31), (1 << 31) - 1
    for values in ((lo, hi), (-3000, 3000), (hi - 5, hi)):  # extremes: sums near 2**53 / 2**22
        acc = rng.integers(*values, size=(2, 5, 37, 41), endpoint=True).astype(np.int32)
        want = acc.astype(np.float64).mean(axis=(0, 2, 3))
        np.testing.assert_array_equal(_channel_mean(acc, (0, 2, 3)).view(np.int64), want.view(np.int64))


def _quantized_with_workers(monkeypatch: pytest.MonkeyPatch, workers: int) -> Graph:
    import compiler.quant.bias as bias

    split = bias.split_point
    monkeypatch.setattr(bias, "split_point", lambda g, count, moments, _: split(g, count, moments, workers))
    return quantize(small_cnn(), inputs(small_cnn(), 7, seed=4))


def test_a_forked_worker_gives_one_processs_biases_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = (_quantized_with_workers(monkeypatch, w) for w in (1, 2))
    assert [n.op for n in one.nodes] == [n.op for n in two.nodes]
    corrected = [n.inputs[2] for n in one.nodes if n.op in ("QConv", "QGemm")]
    assert len(corrected) >= 3
    for name in corrected:
        np.testing.assert_array_equal(one.const_data(name), two.const_data(name))


def test_a_failing_worker_fails_the_correction(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler.quant.bias as bias

    def broken(*args: object) -> None:
        raise QuantizationError("the worker's inputs are bad")

    monkeypatch.setattr(bias, "_worker", broken)
    with pytest.raises(QuantizationError, match=r"^the worker's inputs are bad$"):
        _quantized_with_workers(monkeypatch, 2)


def test_stacked_runs_and_channel_sums_give_the_accumulators_biases(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler.quant.bias as bias

    fast = _quantized_with_workers(monkeypatch, 1)
    monkeypatch.setattr(bias, "BATCHED", frozenset())  # each input on its own
    monkeypatch.setattr(bias, "channel_sums", lambda *args: None)  # means from the accumulators
    slow = _quantized_with_workers(monkeypatch, 1)
    corrected = [n.inputs[2] for n in slow.nodes if n.op in ("QConv", "QGemm")]
    assert len(corrected) >= 3
    for name in corrected:
        np.testing.assert_array_equal(fast.const_data(name), slow.const_data(name))
    for a, b in zip(fast.nodes, slow.nodes, strict=True):
        assert (a.op, a.inputs, a.outputs) == (b.op, b.inputs, b.outputs)


def test_only_the_nodes_that_feed_a_corrected_layer_run() -> None:
    from compiler.quant.bias import BiasTarget, _feeding

    g = quantize(small_cnn(), inputs(small_cnn(), 2, seed=4), bias_correction=False)
    ops = [n.op for n in g.nodes]
    first = ops.index("QConv")
    target = BiasTarget(np.zeros(1), np.ones(1))
    needed = _feeding(g, {g.nodes[first].outputs[0]: target})
    assert first in needed and max(needed) == first  # nothing after it
    assert ops.index("Quantize") in needed  # its input's producer
    assert _feeding(g, {}) == set()
