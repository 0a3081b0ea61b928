"""Unsigned activations (zero point -128): the producer's clip and bias offset, the readers'
exact bias term, that the codes stand for the float values at 255 steps, the refusals, and a
convolution kept float (`keep_float`); which values qualify: test_plan.py."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const, run_graph
from compiler.graph.builder import append
from compiler.graph.opdefs.qops import qconv_acc
from compiler.ops.cpu.qconv import conv_reference
from compiler.quant import Plan, QuantizationError, codings, collect, quantize, rewrite
from compiler.quant.plan import UNSIGNED_OFFSET
from compiler.quant.static import activation_scales
from tests.compiler.quant.graphs import inputs, small_cnn

CHANNELS = 16  # the reader sums the errors of 16 input channels: they outweigh its own rounding
W_DW = np.linspace(0.5, 3.0, CHANNELS, dtype=np.float32).reshape(CHANNELS, 1, 1, 1)
W_PW = np.random.default_rng(0).standard_normal((3, CHANNELS, 1, 1)).astype(np.float32)
B_PW = np.array([0.1, -0.2, 0.05], np.float32)
W_DW3 = np.random.default_rng(1).standard_normal((CHANNELS, 1, 3, 3)).astype(np.float32)
B_DW3 = np.linspace(-0.3, 0.3, CHANNELS, dtype=np.float32)


def _attrs(pad: int = 0, group: int = 1) -> dict[str, object]:
    return {"strides": (1, 1), "pads": (pad,) * 4, "dilations": (1, 1), "group": group}


def _graph(clip_min: float = 0.0, reader_pad: int = 0, float_reader: bool = False,
           depthwise_reader: bool = False) -> Graph:
    """x[1,16,4,4] -> depthwise 1x1 conv -> Clip(clip_min, 6) = r -> 1x1 conv (3 channels) = p
    -> pool -> y; or r -> depthwise 3x3 conv padded by 1 = p."""
    g = Graph("unsigned")
    g.add_input("x", (1, CHANNELS, 4, 4), "float32")
    g.add_value(const("w_dw", W_DW))
    append(g, "Conv", ["x", "w_dw"], ["c"], _attrs(group=CHANNELS))
    append(g, "Clip", ["c"], ["r"], {"min": clip_min, "max": 6.0})
    if depthwise_reader:
        g.add_value(const("w_pw", W_DW3))
        g.add_value(const("b_pw", B_DW3))
        append(g, "Conv", ["r", "w_pw", "b_pw"], ["p"], _attrs(pad=1, group=CHANNELS))
    else:
        g.add_value(const("w_pw", W_PW))
        g.add_value(const("b_pw", B_PW))
        append(g, "Conv", ["r", "w_pw", "b_pw"], ["p"], _attrs(pad=reader_pad))
    append(g, "GlobalAveragePool", ["p"], ["y"])
    g.outputs = ["y"]
    if float_reader:
        append(g, "Sigmoid", ["r"], ["s"])
        g.outputs.append("s")
    return g


def _inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.uniform(-1.0, 2.5, (1, CHANNELS, 4, 4)).astype(np.float32)} for _ in range(count)]


def _quantize(g: Graph, unsigned: bool, per_channel: bool = False) -> Graph:
    return quantize(g, _inputs(8, 1), method="minmax", per_channel=per_channel, rounding="nearest",
                    bias_correction=False, unsigned=unsigned)


def test_producer_clips_from_minus_128_and_readers_add_the_offset_to_their_bias() -> None:
    g = _graph()
    signed, unsigned = _quantize(g, False), _quantize(g, True)
    convs = {n.outputs[0]: n for n in unsigned.nodes if n.op == "QConv"}
    producer, reader = convs["r"], convs["p"]
    assert (producer.int_attr("clip_lo"), producer.int_attr("clip_hi")) == (-UNSIGNED_OFFSET, 127)
    # the reader's accumulator reads codes q = x / s - 128: its bias adds 128 * sum_c w_q[k, c]
    w = _data(unsigned, reader.inputs[1]).astype(np.int64)
    s_r = activation_scales(g, collect(g, _inputs(8, 1)), "minmax")["r"] * 127 / 255
    w_scale = np.abs(W_PW.reshape(3, -1)).max(axis=1) / 127
    quantized_bias = np.rint(B_PW / (np.float32(s_r) * w_scale.astype(np.float32)))
    expected = quantized_bias + 128 * w.reshape(3, -1).sum(axis=1)
    np.testing.assert_allclose(_data(unsigned, reader.inputs[2]), expected, atol=1)
    # the producer's bias is 128 output steps lower: 128 * 2**shift / mult accumulator steps
    mult, shift = _data(unsigned, producer.inputs[3]).astype(np.float64), producer.int_attr("shift")
    base = _data(signed, next(n for n in signed.nodes if n.outputs[0] == "r").inputs[2])
    offset = base.astype(np.float64) - _data(unsigned, producer.inputs[2])
    np.testing.assert_allclose(offset * mult / 2.0**shift, 128, atol=0.6)  # the base's own rounding apart


def _data(g: Graph, name: str) -> np.ndarray:
    data = g.const_data(name)
    assert data is not None, name
    return data


def test_codes_stand_for_the_float_values_at_twice_the_resolution() -> None:
    g = _graph()
    xs = _inputs(6, 2)
    for unsigned, steps in ((False, 127), (True, 255)):
        q = _quantize(g, unsigned)
        scale = 6.0 / steps  # minmax: r reaches 6 (3 x 2.5 clipped)
        for x in xs:
            code = run_graph(q, x, keep=["r"])["r"].astype(np.float64)
            real = run_graph(g, x, keep=["r"])["r"]
            zero = UNSIGNED_OFFSET if unsigned else 0
            # within one step plus the input's quantization error carried through w_dw (<= 3 * 2.5 / 254)
            assert np.abs((code + zero) * scale - real).max() <= scale + 3 * 2.5 / 254 + 1e-6


def test_unsigned_codes_track_the_float_graph_better() -> None:
    g = _graph()
    xs = _inputs(8, 3)
    ref = np.concatenate([run_graph(g, x)["y"].ravel() for x in xs])
    errors = {}
    for unsigned in (False, True):
        q = _quantize(g, unsigned)
        got = np.concatenate([run_graph(q, x)["y"].ravel() for x in xs])
        errors[unsigned] = float(np.sqrt(np.mean((got - ref) ** 2)))
    # r's own rounding error halves; the input's (carried through w_dw) and p's rounding stay
    assert errors[True] < 0.8 * errors[False], errors  # rms 0.036 -> 0.027


def test_per_channel_and_unsigned_together() -> None:
    g = _graph()
    q = _quantize(g, True, per_channel=True)
    producer = next(n for n in q.nodes if n.op == "QConv" and n.outputs[0] == "r")
    assert producer.int_attr("clip_lo") == -UNSIGNED_OFFSET and producer.float_attr("out_scale") == 1.0
    xs = _inputs(4, 4)
    for x in xs:
        np.testing.assert_allclose(run_graph(q, x)["y"], run_graph(g, x)["y"], atol=0.15)


def test_a_padded_depthwise_reader_pads_with_the_code_of_zero_exactly() -> None:
    """Its padding reads -128 and its bias holds + 128 * sum w: at every position, borders too,
    the accumulator plus bias is that of the codes + 128 (the unsigned steps) padded with 0."""
    g = _graph(depthwise_reader=True)
    q = _quantize(g, True)
    reader = next(n for n in q.nodes if n.op == "QConv" and n.outputs[0] == "p")
    assert reader.int_attr("pad_value") == -UNSIGNED_OFFSET and reader.ints_attr("pads") == (1, 1, 1, 1)
    w, bias = _data(q, reader.inputs[1]), _data(q, reader.inputs[2]).astype(np.int64)
    steps_bias = bias - UNSIGNED_OFFSET * w.astype(np.int64).reshape(CHANNELS, -1).sum(axis=1)
    for x in _inputs(3, 5):
        codes = run_graph(q, x, keep=["r"])["r"]
        got = qconv_acc(codes, w, reader.attrs) + bias.reshape(1, -1, 1, 1)
        steps = codes.astype(np.int64) + UNSIGNED_OFFSET  # round(r / s), in [0, 255]
        want = conv_reference(steps, w, (1, 1), (1, 1, 1, 1), CHANNELS) + steps_bias.reshape(1, -1, 1, 1)
        np.testing.assert_array_equal(got, want)


def test_a_padded_reader_or_a_float_reader_is_refused() -> None:
    padded = "reads r, which has a zero point, but pads its input with one group"
    for g, match in ((_graph(reader_pad=1), padded), (_graph(float_reader=True), "zero point")):
        cal = collect(g, _inputs(2, 1))
        scales = activation_scales(g, cal, "minmax")
        with pytest.raises(QuantizationError, match=match):
            rewrite(g, Plan(codings(scales, unsigned={"r"}), calibration=cal))


def test_a_reader_that_cannot_be_lowered_is_refused() -> None:
    g = _graph()
    g.nodes.pop()  # the pool: the reader's output p is now the graph's output, which stays float
    g.outputs = ["p"]
    cal = collect(g, _inputs(2, 1))
    scales = activation_scales(g, cal, "minmax")
    match = r"^node p \(QConv\) reads r, which has per-channel scales or a zero point, but cannot be lowered$"
    with pytest.raises(QuantizationError, match=match):
        rewrite(g, Plan(codings(scales, unsigned={"r"}), calibration=cal))


def test_an_unsigned_value_whose_producer_stays_float_enters_with_zero_point_minus_128() -> None:
    g = _graph(depthwise_reader=True)
    q = quantize(g, _inputs(8, 1), method="minmax", rounding="nearest", bias_correction=False,
                 keep_float=lambda graph, node: node.outputs[0] == "c")
    ops = [(n.op, n.outputs[0]) for n in q.nodes]
    assert ops[:4] == [("Conv", "c"), ("Clip", "r"), ("Quantize", "r.q"), ("QConv", "p")]
    quant = q.nodes[2]
    assert quant.int_attr("zero_point") == -UNSIGNED_OFFSET
    scale = quant.float_attr("scale")
    assert scale == pytest.approx(6.0 / 255, rel=1e-6)  # minmax: r reaches 6, over 255 steps
    for x in _inputs(3, 6):
        real = run_graph(g, x, keep=["r"])["r"]
        codes = run_graph(q, x, keep=["r.q"])["r.q"].astype(np.int64)
        np.testing.assert_array_equal(codes, np.rint(real / np.float32(scale)) - UNSIGNED_OFFSET)
        np.testing.assert_allclose(run_graph(q, x)["y"], run_graph(g, x)["y"], atol=0.1)  # y spans +-5


def test_a_convolution_kept_float_runs_float_before_a_quantize() -> None:
    g = small_cnn()
    calibration, xs = inputs(g, 4, 1), inputs(g, 4, 2)
    q = quantize(g, calibration, rounding="nearest", bias_correction=False,
                 keep_float=lambda graph, node: node.outputs[0] == "c1")
    ops = [(n.op, n.outputs[0]) for n in q.nodes]
    assert ops[:3] == [("Conv", "c1"), ("Relu", "r1"), ("Quantize", "r1.q")]
    assert [op for op, _ in ops].count("QConv") == 2  # c2 and the depthwise c3
    for x in xs:
        want = run_graph(g, x)["logits"]
        got = run_graph(q, x)["logits"]
        assert float(np.dot(want.ravel(), got.ravel()) / np.linalg.norm(want) / np.linalg.norm(got)) > 0.99
