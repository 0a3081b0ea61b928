"""Static quantization of a small CNN: the ops it becomes, accuracy, wrap margins, options."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const, print_graph, run_graph, verify
from compiler.graph.builder import append
from compiler.quant import CALIBRATORS, QuantizationError, collect, quantize
from compiler.quant.accuracy import agreement, graph_outputs
from compiler.quant.check import wrap_margins
from compiler.quant.requant import HEADROOM
from compiler.quant.static import linear_stream_values
from tests.compiler.quant.graphs import inputs, small_cnn


@pytest.fixture(scope="module")
def calibration() -> list[dict[str, np.ndarray]]:
    return inputs(small_cnn(), 16, seed=1)


def test_small_cnn_becomes_the_fused_integer_ops(calibration: list) -> None:
    q = verify(quantize(small_cnn(), calibration))
    ops = [n.op for n in q.nodes]
    assert ops == ["Quantize", "QConv", "QConv", "QAdd", "MaxPool", "QConv", "QGlobalAvgPool", "Flatten",
                   "Dequantize", "Gemm"]
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


def _linear_residual(seed: int = 0) -> Graph:
    """x[1,4,6,6] -> conv c1 -> add a1 = x + c1 -> conv c2 -> add a2 = a1 + c2 -> conv c3 ->
    add a3 = a2 + c3 -> relu y: a linear stream (c1, a1, c2, a2; no activation after the adds),
    then an add that a Relu rectifies (a3, as in ResNet)."""
    rng = np.random.default_rng(seed)
    g = Graph("linear_residual")
    g.add_input("x", (1, 4, 6, 6), "float32")
    attrs = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1}
    for i in (1, 2, 3):
        g.add_value(const(f"w{i}", (rng.standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32)))
    append(g, "Conv", ["x", "w1"], ["c1"], attrs)
    append(g, "Add", ["x", "c1"], ["a1"])
    append(g, "Conv", ["a1", "w2"], ["c2"], attrs)
    append(g, "Add", ["a1", "c2"], ["a2"])
    append(g, "Conv", ["a2", "w3"], ["c3"], attrs)
    append(g, "Add", ["a2", "c3"], ["a3"])
    append(g, "Relu", ["a3"], ["y"])
    g.outputs = ["y"]
    return g


def test_a_linear_residual_stream_is_calibrated_by_its_own_method() -> None:
    g = _linear_residual()
    assert linear_stream_values(g) == ["c1", "a1", "c2", "a2"]  # a3 is rectified
    assert linear_stream_values(small_cnn()) == []  # its add is followed by a Relu
    feeds = inputs(g, 8, seed=2)
    stats = collect(g, feeds)

    def scales(**options: object) -> dict[str, float]:  # mse: thresholds below the max here
        q = quantize(g, feeds, method="mse", rounding="nearest", bias_correction=False, **options)  # type: ignore[arg-type]
        return {n.outputs[0]: n.float_attr("out_scale") for n in q.nodes if n.op in ("QConv", "QAdd")}

    default, plain = scales(), scales(stream_method=None)
    overridden = scales(overrides={"a1": "mse"})
    assert all(stats.amax(name, "mse") < stats.amax(name, "minmax") for name in ("c1", "a1", "a2", "c3"))
    for name in ("c1", "a1", "c2", "a2"):
        assert default[name] == pytest.approx(stats.amax(name, "minmax") / 127, rel=1e-6)
        assert plain[name] == pytest.approx(stats.amax(name, "mse") / 127, rel=1e-6)
    assert overridden["a1"] == plain["a1"] and overridden["a2"] == default["a2"]  # overrides come first
    assert default["c3"] == plain["c3"]  # outside the linear stream: the method's calibrator


def test_a_layer_that_cannot_be_quantized_stays_float_with_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler.quant.rewrite_dense as rewrite_dense
    from compiler.quant.errors import QuantizationWarning

    real = rewrite_dense.channel_requant

    def refuse_c2(reals: np.ndarray, bounds: np.ndarray, where: str) -> tuple[np.ndarray, int]:
        if where.startswith("node c2 "):
            raise QuantizationError(f"{where}: scale ratios 3e+09 cannot be applied by a multiply and shift")
        return real(reals, bounds, where)

    monkeypatch.setattr(rewrite_dense, "channel_requant", refuse_c2)
    g = small_cnn(0)
    why = r"layer c2 stays float on the host: node c2 \(QConv\): scale ratios 3e\+09 cannot be applied"
    with pytest.warns(QuantizationWarning, match=why + " by a multiply and shift"):
        q = quantize(g, inputs(g, 4, seed=1))
    ops = {n.outputs[0]: n.op for n in q.nodes}
    assert ops["c2"] == "Conv" and list(ops.values()).count("QConv") == 2  # c1 and the depthwise stay int8
    for feeds in inputs(g, 3, seed=2):
        want, got = run_graph(g, feeds)["logits"], run_graph(q, feeds)["logits"]
        assert float(np.abs(got - want).max()) < 0.1 * float(np.abs(want).max())


def test_a_layer_error_outside_the_dense_layers_is_still_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler.quant.rewrite_dense as rewrite_dense
    from compiler.quant.errors import LayerQuantizationError

    def always(*args: object) -> None:
        raise LayerQuantizationError("nowhere", "node nowhere: broken")

    monkeypatch.setattr(rewrite_dense, "channel_requant", always)
    g = small_cnn(0)
    with pytest.raises(QuantizationError, match="node nowhere: broken"):
        quantize(g, inputs(g, 2, seed=1))
