"""Static quantization of a small CNN: the ops it becomes, accuracy, wrap margins, options."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import print_graph, verify
from compiler.quant import CALIBRATORS, QuantizationError, quantize
from compiler.quant.accuracy import agreement, graph_outputs
from compiler.quant.check import wrap_margins
from compiler.quant.requant import HEADROOM
from tests.compiler.quant.graphs import inputs, small_cnn


@pytest.fixture(scope="module")
def calibration() -> list[dict[str, np.ndarray]]:
    return inputs(small_cnn(), 16, seed=1)


def test_small_cnn_becomes_the_fused_integer_ops(calibration: list) -> None:
    q = verify(quantize(small_cnn(), calibration))
    ops = [n.op for n in q.nodes]
    assert ops == ["Quantize", "QConv", "QConv", "QAdd", "MaxPool", "QConv", "QGlobalAvgPool", "Flatten",
                   "Dequantize", "Gemm"]  # fmt: skip
    by_out = {n.outputs[0]: n for n in q.nodes}
    assert by_out["r1"].int_attr("clip_lo") == 0  # conv + ReLU
    assert by_out["c2"].int_attr("clip_lo") == -128  # feeds the residual add
    assert by_out["r2"].op == "QAdd" and by_out["r2"].int_attr("clip_lo") == 0  # add + ReLU
    depthwise = by_out["r3"]
    assert depthwise.int_attr("group") == 8
    assert depthwise.int_attr("clip_hi") == min(127, round(6.0 / depthwise.float_attr("out_scale")))
    assert by_out["p"].inputs == ("r2",)  # int8 max pool, the add's scale
    # the classifier producing the graph output runs in float on the dequantized features
    assert by_out["logits"].op == "Gemm" and q.values["logits"].dtype == "float32"


@pytest.mark.parametrize("method", sorted(CALIBRATORS))
def test_every_calibrator_tracks_the_float_graph(calibration: list, method: str) -> None:
    g = small_cnn()
    q = quantize(g, calibration, method=method)
    held_out = inputs(g, 20, seed=2)
    result = agreement(graph_outputs(g, held_out), graph_outputs(q, held_out))
    assert result.cosine_min > 0.999 and result.top1 >= 0.95


def test_no_calibration_value_wraps(calibration: list) -> None:
    q = quantize(small_cnn(), calibration)
    margins = wrap_margins(q, calibration)
    assert set(margins) == {"r1", "c2", "r2", "r3", "gap"}
    # HEADROOM times the largest calibration accumulator fits (a little more: the bound is
    # estimated from the float run), or the worst case did
    assert max(margins.values()) < 1.0
    assert margins["r1"] < 1.25 / HEADROOM and margins["c2"] < 1.25 / HEADROOM


def test_quantize_cleans_a_copy(calibration: list) -> None:
    g = small_cnn()
    before = print_graph(g)
    quantize(g, calibration)
    assert print_graph(g) == before


def test_overrides_pick_a_calibrator_per_value(calibration: list) -> None:
    g = small_cnn()
    base = quantize(g, calibration, method="percentile")
    tuned = quantize(g, calibration, method="percentile", overrides={"r1": "minmax"})
    b, t = (
        {n.outputs[0]: n.float_attr("out_scale") for n in q.nodes if n.op == "QConv"} for q in (base, tuned)
    )
    assert t["r1"] > b["r1"] and t["c2"] == b["c2"]


@pytest.mark.parametrize(
    "method,overrides,match",
    [
        ("kl", None, r"^unknown calibration method 'kl' for \*; known: minmax, percentile, entropy, mse$"),
        ("mse", {"r1": "max"}, r"^unknown calibration method 'max' for r1; known"),
        ("mse", {"w1": "minmax"}, r"^override for w1, which is not a calibrated float activation$"),
    ],
)
def test_bad_methods(calibration: list, method: str, overrides: dict | None, match: str) -> None:
    with pytest.raises(QuantizationError, match=match):
        quantize(small_cnn(), calibration[:2], method=method, overrides=overrides)
