"""Per-channel scales of a depthwise convolution's output, folded into the 1x1 convolution that
reads it: the scales, the folded weights, the producer's multipliers and clip, and that the
result tracks the float graph better than one scale per tensor (which values qualify:
test_plan.py)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const, run_graph
from compiler.graph.builder import append
from compiler.quant import Plan, QuantizationError, codings, collect, quantize, rewrite
from compiler.quant.calibrate import TensorStats
from compiler.quant.requant import quantize_weight
from compiler.quant.static import activation_scales, channel_scales, settled_channels

# depthwise weights: channel 0 reaches about 6 (Clip saturates it), channel 1 stays near 0.1
W_DW = np.array([3.0, 0.05], np.float32).reshape(2, 1, 1, 1)
W_PW = np.array([[0.5, 4.0], [-0.25, 8.0], [1.0, -2.0]], np.float32).reshape(3, 2, 1, 1)
B_PW = np.array([0.1, -0.2, 0.05], np.float32)


def _conv_attrs(group: int = 1) -> dict[str, object]:
    return {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": group}


def _dw_pw(reader_group: int = 1, extra_reader: str | None = None) -> Graph:
    """x[1,2,4,4] -> depthwise 1x1 conv -> Clip(0, 6) = r -> 1x1 conv (3 channels) -> pool -> y."""
    g = Graph("dw_pw")
    g.add_input("x", (1, 2, 4, 4), "float32")
    g.add_value(const("w_dw", W_DW))
    append(g, "Conv", ["x", "w_dw"], ["c"], _conv_attrs(group=2))
    append(g, "Clip", ["c"], ["r"], {"min": 0.0, "max": 6.0})
    if reader_group == 1:
        g.add_value(const("w_pw", W_PW))
        g.add_value(const("b_pw", B_PW))
        append(g, "Conv", ["r", "w_pw", "b_pw"], ["p"], _conv_attrs())
    else:
        g.add_value(const("w_pw", np.ones((2, 1, 1, 1), np.float32)))
        append(g, "Conv", ["r", "w_pw"], ["p"], _conv_attrs(group=2))
    append(g, "GlobalAveragePool", ["p"], ["y"])
    outputs = ["y"]
    if extra_reader == "float":
        append(g, "Sigmoid", ["r"], ["s"])
        outputs.append("s")
    g.outputs = outputs
    return g


def _inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.uniform(0.0, 2.5, (1, 2, 4, 4)).astype(np.float32)} for _ in range(count)]


def test_scales_between_the_tensor_and_each_channel() -> None:
    g = _dw_pw()
    cal = collect(g, _inputs(4, 1))
    # channel 0: 3 x, x up to 2.5 -> clipped at 6; channel 1: 0.05 x < 0.125
    per = cal.stats["r"].axis_absmax[1]
    assert per[0] == 6.0 and per[1] < 0.125
    tensor = channel_scales(g, cal, ["r"], "minmax", alpha=0.0)["r"]
    own = channel_scales(g, cal, ["r"], "minmax", alpha=1.0)["r"]
    half = channel_scales(g, cal, ["r"], "minmax", alpha=0.5)["r"]
    np.testing.assert_allclose(tensor, [6 / 127, 6 / 127], rtol=1e-6)
    np.testing.assert_allclose(own, per / 127, rtol=1e-6)
    np.testing.assert_allclose(half, np.sqrt(6 * per) / 127, rtol=1e-6)


def test_entropy_is_replaced_by_percentile_for_channel_scales_unless_overridden() -> None:
    g = _dw_pw()
    cal = collect(g, _inputs(4, 1))
    assert cal.amax("r", "entropy") != cal.amax("r", "percentile")  # the replacement matters here
    by_entropy = channel_scales(g, cal, ["r"], "entropy")["r"]
    np.testing.assert_array_equal(by_entropy, channel_scales(g, cal, ["r"], "percentile")["r"])
    forced = channel_scales(g, cal, ["r"], "percentile", overrides={"r": "entropy"})["r"]
    ratio = forced / channel_scales(g, cal, ["r"], "minmax")["r"]
    np.testing.assert_allclose(ratio, cal.amax("r", "entropy") / cal.amax("r", "minmax"), rtol=1e-6)


def _channel_stats(maxima: list[list[float]]) -> TensorStats:
    """Statistics of inputs [1, C, 1, 1] whose channels take the given values, one list per input."""
    stats = TensorStats()
    for row in maxima:
        stats.add(np.array(row, np.float32).reshape(1, -1, 1, 1))
    return stats


def test_channels_are_settled_when_no_input_stands_out() -> None:
    even = [[1.0, 0.5, 0.0] + [1.0] * 47, [1.5, 0.25, 0.0] + [1.0] * 47]  # jumps at most 2x; a dead channel
    assert settled_channels(_channel_stats(even))
    # one channel of 50 live ones (2%) jumps: still settled; two (4%): not
    one = [[0.1] + [1.0] * 49, [1.0] * 50]
    two = [[0.1, 0.1] + [1.0] * 48, [1.0] * 50]
    assert settled_channels(_channel_stats(one)) and not settled_channels(_channel_stats(two))
    assert settled_channels(_channel_stats(two), fraction=0.04)
    assert not settled_channels(_channel_stats([[1.0, 2.0]]))  # one input: every channel jumps
    assert settled_channels(_channel_stats([[0.0, 0.0], [0.0, 0.0]]))  # nothing live


def test_unsettled_channel_ranges_keep_one_scale() -> None:
    g = _dw_pw()
    # channel 1 is excited by one calibration input only (x up to 2.5 there, 0.02 elsewhere)
    inputs = _inputs(4, 1)
    for feed in inputs[1:]:
        feed["x"][0, 1] = np.float32(0.02)
    cal = collect(g, inputs)
    assert not settled_channels(cal.stats["r"])
    assert channel_scales(g, cal, ["r"], "minmax") == {}
    q = quantize(g, inputs, method="minmax")
    reader = next(n for n in q.nodes if n.op == "QConv" and n.outputs[0] == "p")
    # one scale: the reader takes the tensor's, 6 / 255 (unsigned), not 1.0 (folded channel scales)
    assert q.values[reader.inputs[0]].dtype == "int8"
    producer = next(n for n in q.nodes if n.op == "QConv" and n.outputs[0] == "r")
    assert producer.float_attr("out_scale") == pytest.approx(6 / 255, rel=1e-6)
    settled = quantize(g, _inputs(4, 1), method="minmax")
    assert next(n for n in settled.nodes if n.outputs[0] == "r").float_attr("out_scale") == 1.0


def test_folded_weights_are_w_times_the_channel_scales_before_quantization() -> None:
    g = _dw_pw()
    s_x, s_c, s_p = 2 / 127, np.array([6 / 127, 0.1 / 127]), 0.5
    q = rewrite(g, Plan(codings({"x": s_x, "r": 1.0, "p": s_p}, {"r": s_c})))
    convs = {n.outputs[0]: n for n in q.nodes if n.op == "QConv"}
    producer, reader = convs["r"], convs["p"]
    # the reader: int8 weights of w[k, c] * s_c, per output channel; input scale 1
    folded = quantize_weight(W_PW.astype(np.float64) * s_c.reshape(1, 2, 1, 1))
    np.testing.assert_array_equal(q.const_data(reader.inputs[1]), folded.data)
    np.testing.assert_array_equal(q.const_data(reader.inputs[2]), np.rint(B_PW / folded.scales))
    mult, shift = np.asarray(q.const_data(reader.inputs[3])), reader.int_attr("shift")
    np.testing.assert_allclose(mult / 2.0**shift, folded.scales / s_p, rtol=1e-4)
    # the producer: multipliers for its per-channel output scales; Clip(0, 6) is [0, 127] for both
    w_scale = quantize_weight(W_DW).scales
    mult, shift = np.asarray(q.const_data(producer.inputs[3])), producer.int_attr("shift")
    np.testing.assert_allclose(mult / 2.0**shift, s_x * w_scale / s_c, rtol=1e-4)
    assert (producer.int_attr("clip_lo"), producer.int_attr("clip_hi")) == (0, 127)
    assert producer.float_attr("out_scale") == 1.0


def test_per_channel_scales_track_the_float_graph_better() -> None:
    g = _dw_pw()
    calibration, xs = _inputs(8, 1), _inputs(8, 2)
    ref = np.concatenate([run_graph(g, x)["y"].ravel() for x in xs])
    errors = {}
    for per_channel in (False, True):
        q = quantize(g, calibration, method="minmax", per_channel=per_channel)
        got = np.concatenate([run_graph(q, x)["y"].ravel() for x in xs])
        errors[per_channel] = float(np.sqrt(np.mean((got - ref) ** 2)))
    # one scale: channel 1 (< 0.125) is 0, 1 or 2 steps of 6 / 127, and the reader's 2 to 32 times
    # larger weights on it multiply that error; with alpha 0.3 its step is about 3 times finer
    assert errors[True] < 0.7 * errors[False], errors  # rms 0.026 -> 0.015


def test_a_value_with_channel_scales_is_never_dequantized() -> None:
    g = _dw_pw(extra_reader="float")
    cal = collect(g, _inputs(2, 1))
    scales = activation_scales(g, cal, "minmax")
    with pytest.raises(QuantizationError, match="per-channel scales"):
        rewrite(g, Plan(codings(scales, {"r": np.full(2, 0.01)}), calibration=cal))


def test_a_reader_that_cannot_fold_is_refused() -> None:
    g = _dw_pw(reader_group=2)
    cal = collect(g, _inputs(2, 1))
    scales = activation_scales(g, cal, "minmax")
    with pytest.raises(QuantizationError, match="cannot fold"):
        rewrite(g, Plan(codings(scales, {"r": np.full(2, 0.01)}), calibration=cal))
