"""Quantization that survives trained weights (compiler.quant.rewrite_dense's scale floors):
channels whose weights a folded batch norm left almost zero but whose biases are real, and
channels whose requantization ratio is far below the layer's largest."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.driver import compile_graph
from compiler.graph.interp import run_graph
from compiler.quant import quantize
from compiler.quant.requant import BIAS_STEPS, bias_scale_floor, quantize_weight
from compiler.quant.rewrite_dense import RATIO_FLOOR, ratio_scale_floor
from compiler.target import AcceleratorTarget
from hw.config import resolve
from sim.backends import make_backend
from tests.compiler.quant.graphs import inputs, small_cnn


def _trained_like(near_zero: float = 1e-7, bias: float = 2.0):  # type: ignore[no-untyped-def]
    """small_cnn with the depthwise conv's channel 0 almost zero and a real bias, channel 1 dead
    (zero weights, bias -1): what batch-norm folding leaves in trained depthwise layers."""
    g = small_cnn(3)
    w, b = g.values["w3"].data.copy(), g.values["b3"].data.copy()  # type: ignore[union-attr]
    w[0] *= near_zero
    w[1] = 0.0
    b[0], b[1] = bias, -1.0
    g.values["w3"] = g.values["w3"].__class__("w3", w.shape, "float32", w)
    g.values["b3"] = g.values["b3"].__class__("b3", b.shape, "float32", b)
    return g


def test_bias_floor_keeps_the_bias_within_its_steps() -> None:
    floor = bias_scale_floor(np.array([2.0, 0.0, -1e-3]), in_scale=0.01)
    np.testing.assert_allclose(floor, [2.0 / (0.01 * BIAS_STEPS), 0.0, 1e-3 / (0.01 * BIAS_STEPS)])
    q = quantize_weight(np.array([[1e-7, -1e-7], [1.0, 0.5]]), min_scales=np.array([1e-3, 0.0]))
    np.testing.assert_allclose(q.scales, [1e-3, 1.0 / 127], rtol=1e-6)
    np.testing.assert_array_equal(q.data, [[0, 0], [127, 64]])  # the near-zero channel rounds to 0


def test_ratio_floor_is_relative_to_the_layers_largest_ratio() -> None:
    w = np.array([[127.0, 0.0], [127e-9, 0.0]])  # channel scales 1 and 1e-9
    floor = ratio_scale_floor(w, 0, s_in=0.5, s_outs=np.array([2.0, 2.0]))
    np.testing.assert_allclose(floor, [RATIO_FLOOR, RATIO_FLOOR])  # 2**-12 of the largest scale


def test_near_zero_channels_with_real_biases_quantize_and_keep_their_bias() -> None:
    g = _trained_like()
    calibration = inputs(g, 8, seed=1)
    q = quantize(g, calibration)  # raised "bias does not fit int32 at the accumulator's scale" before
    test = inputs(g, 4, seed=2)
    for feeds in test:
        want = run_graph(g, feeds, keep=["r3"])
        got = run_graph(q, feeds, keep=["r3"])
        # channel 0 is the constant clip(2.0), channel 1 clip(-1) = 0: both exact in int8
        codes = got["r3"]
        assert np.unique(codes[0, 0]).size == 1 and np.unique(codes[0, 1]).size == 1
        cos = float(np.dot(want["logits"].ravel(), got["logits"].ravel())
                    / np.linalg.norm(want["logits"]) / np.linalg.norm(got["logits"]))
        assert cos > 0.99


@pytest.mark.parametrize("near_zero", [1e-7, 1e-4, 0.0])
def test_near_zero_channels_run_exact_on_the_accelerator(near_zero: float) -> None:
    g = _trained_like(near_zero)
    cfg = resolve("tiny", [])
    model = compile_graph(g, AcceleratorTarget(cfg), inputs(g, 4, seed=1), offload_shallow=True)
    fsim = make_backend("fsim", cfg)
    for feeds in inputs(g, 2, seed=4):
        got = model.run(feeds, fsim).outputs["logits"]
        want = run_graph(model.graph, feeds)["logits"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
