"""Per-channel scales for a linear residual stream, one profile per stage (MobileNetV2's
bottleneck outputs and the adds that join them): the stream's values, the scales, that adds keep
scalar multipliers and readers fold the profile, that inconsistent parameters are refused, and
that the result tracks the float graph better than one scale per tensor (which stages qualify:
test_plan.py)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const, run_graph
from compiler.graph.builder import append
from compiler.quant import Plan, QuantizationError, codings, collect, quantize, rewrite
from compiler.quant.requant import quantize_weight
from compiler.quant.static import activation_scales, linear_stream_values, stream_channel_scales

# the stream's channel 0 spans about 40 times channel 1's range; the reader weighs channel 1 heavily
W_IN = np.array([[2.0, 1.0, -1.5, 0.5], [0.05, -0.02, 0.03, 0.04]], np.float32).reshape(2, 4, 1, 1)
W_EXPAND = np.array([[0.5, 8.0], [-0.3, 6.0], [0.2, -9.0]], np.float32).reshape(3, 2, 1, 1)
W_PROJECT = np.array([[0.4, -0.2, 0.3], [0.01, 0.02, -0.015]], np.float32).reshape(2, 3, 1, 1)
W_READ = np.array([[0.3, 12.0], [-0.2, 9.0], [0.1, -15.0]], np.float32).reshape(3, 2, 1, 1)
STAGE = ["s0", "s1", "s2"]


def _conv_attrs() -> dict[str, object]:
    return {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1}


def _stream(float_reader: bool = False) -> Graph:
    """x -> conv = s0 (the stream enters) -> expand, Relu -> project = s1 -> s0 + s1 = s2 -> 1x1
    conv -> pool -> y; with `float_reader`, a Sigmoid of s2 is an output too."""
    g = Graph("stream")
    g.add_input("x", (1, 4, 4, 4), "float32")
    for name, w in (("w_in", W_IN), ("w_expand", W_EXPAND), ("w_project", W_PROJECT), ("w_read", W_READ)):
        g.add_value(const(name, w))
    append(g, "Conv", ["x", "w_in"], ["s0"], _conv_attrs())
    append(g, "Conv", ["s0", "w_expand"], ["e"], _conv_attrs())
    append(g, "Relu", ["e"], ["r"])
    append(g, "Conv", ["r", "w_project"], ["s1"], _conv_attrs())
    append(g, "Add", ["s0", "s1"], ["s2"])
    append(g, "Conv", ["s2", "w_read"], ["p"], _conv_attrs())
    append(g, "GlobalAveragePool", ["p"], ["y"])
    g.outputs = ["y"]
    if float_reader:
        append(g, "Sigmoid", ["s2"], ["sig"])
        g.outputs.append("sig")
    return g


def _inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0.0, 1.0, (1, 4, 4, 4)).astype(np.float32)} for _ in range(count)]


def test_the_stream_is_the_projections_and_the_add() -> None:
    assert linear_stream_values(_stream()) == STAGE  # which stages qualify: tests/compiler/quant/test_plan.py


def test_one_profile_per_stage_and_no_channel_below_its_range() -> None:
    g = _stream()
    cal = collect(g, _inputs(6, 1))
    scales = activation_scales(g, cal, "minmax")
    channel = stream_channel_scales(cal, [STAGE], scales)
    profiles = [channel[v] / scales[v] for v in STAGE]
    for profile in profiles[1:]:
        np.testing.assert_allclose(profile, profiles[0], rtol=1e-6)
    assert profiles[0].max() == pytest.approx(1.0) and profiles[0].min() < 0.5
    for v in STAGE:  # each channel's threshold covers what calibration saw of it
        assert np.all(channel[v] * 127 >= cal.stats[v].axis_absmax[1] * (1 - 1e-6))
    whole = stream_channel_scales(cal, [STAGE], scales, alpha=0.0)
    for v in STAGE:
        np.testing.assert_allclose(whole[v], scales[v], rtol=1e-6)


def _lowered(per_channel: bool) -> tuple[Graph, dict[str, float], dict[str, np.ndarray]]:
    g = _stream()
    cal = collect(g, _inputs(6, 1))
    scales = activation_scales(g, cal, "minmax")
    channel = stream_channel_scales(cal, [STAGE], scales) if per_channel else {}
    stream = STAGE if per_channel else []
    plan = Plan(codings(scales, channel, stream), calibration=cal)
    return rewrite(g, plan), scales, channel


def test_adds_keep_scalar_multipliers_and_readers_fold_the_profile() -> None:
    q, scales, channel = _lowered(per_channel=True)
    plain, _, _ = _lowered(per_channel=False)
    add = next(n for n in q.nodes if n.op == "QAdd")
    assert add.attrs == next(n for n in plain.nodes if n.op == "QAdd").attrs  # from the stream factors
    reader = next(n for n in q.nodes if n.op == "QConv" and n.outputs[0] == "p")
    folded = quantize_weight(W_READ.astype(np.float64) * (channel["s2"] / scales["s2"]).reshape(1, 2, 1, 1))
    np.testing.assert_array_equal(q.const_data(reader.inputs[1]), folded.data)
    mult, shift = q.const_data(reader.inputs[3]), reader.int_attr("shift")  # input scale: s2's factor
    np.testing.assert_allclose(mult / 2.0**shift, scales["s2"] * folded.scales / scales["p"], rtol=1e-4)
    producer = next(n for n in q.nodes if n.op == "QConv" and n.outputs[0] == "s0")
    mult, shift = q.const_data(producer.inputs[3]), producer.int_attr("shift")
    w_scale = quantize_weight(W_IN).scales
    np.testing.assert_allclose(mult / 2.0**shift, scales["x"] * w_scale / channel["s0"], rtol=1e-4)
    assert producer.float_attr("out_scale") == pytest.approx(scales["s0"])


def test_stream_scales_track_the_float_graph_better() -> None:
    g = _stream()
    calibration, xs = _inputs(8, 1), _inputs(8, 2)
    ref = np.concatenate([run_graph(g, x)["y"].ravel() for x in xs])
    errors = {}
    for per_channel in (False, True):
        q = quantize(g, calibration, method="minmax", per_channel=per_channel, bias_correction=False)
        assert any(n.op == "QAdd" for n in q.nodes)
        got = np.concatenate([run_graph(q, x)["y"].ravel() for x in xs])
        errors[per_channel] = float(np.sqrt(np.mean((got - ref) ** 2)))
    assert errors[True] < 0.5 * errors[False], errors


def test_an_add_of_values_without_one_profile_is_refused() -> None:
    g = _stream()
    cal = collect(g, _inputs(2, 1))
    scales = activation_scales(g, cal, "minmax")
    channel = stream_channel_scales(cal, [STAGE], scales)
    with pytest.raises(QuantizationError, match="s0, s1, s2 are not all values of one stream"):
        rewrite(g, Plan(codings(scales, channel, ["s0"])))
    skewed = {**channel, "s1": channel["s1"] * np.array([1.0, 2.0])}
    with pytest.raises(QuantizationError, match="s0, s1, s2 have channel scales of different profiles"):
        rewrite(g, Plan(codings(scales, skewed, STAGE)))
