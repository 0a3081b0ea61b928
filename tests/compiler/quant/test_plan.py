"""The quantization plan: which values of small hand-built graphs may take per-channel scales, a
stream's profile or zero point -128 (`channel_scaled_values`, `channel_scaled_streams`,
`unsigned_values`), the `Coding` records that static quantization plans for them, and the
records' own contract."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, const
from compiler.graph.builder import append
from compiler.quant.plan import (
    UNSIGNED_OFFSET,
    Coding,
    Plan,
    channel_scaled_streams,
    channel_scaled_values,
    codings,
    unsigned_values,
)
from compiler.quant.static import calibrate, static_plan
from tests.compiler.quant.graphs import small_cnn

CHANNELS = 4


def _conv(g: Graph, x: str, out: str, cout: int, group: int = 1, pad: int = 0, kernel: int = 1) -> None:
    """A convolution of `x` (CHANNELS channels) with seeded constant weights, named after `out`."""
    rng = np.random.default_rng(len(g.nodes))
    w = rng.standard_normal((cout, CHANNELS // group, kernel, kernel)).astype(np.float32)
    g.add_value(const(f"w_{out}", w))
    attrs = {"strides": (1, 1), "pads": (pad,) * 4, "dilations": (1, 1), "group": group}
    append(g, "Conv", [x, f"w_{out}"], [out], attrs)


def _depthwise(act: str = "Relu", reader: str = "pointwise", clip_min: float = 0.0) -> Graph:
    """x[1,4,6,6] -> depthwise 3x3 conv = d -> `act` = r -> `reader` = p -> pool = y. The reader
    is a 1x1 group-1 convolution ("pointwise"), a padded 3x3 one ("padded"), a padded depthwise
    one ("depthwise"), or a pointwise one with a Sigmoid of r as a second output ("float")."""
    g = Graph("depthwise")
    g.add_input("x", (1, CHANNELS, 6, 6), "float32")
    _conv(g, "x", "d", CHANNELS, group=CHANNELS, pad=1, kernel=3)
    append(g, act, ["d"], ["r"], {"min": clip_min, "max": 6.0} if act == "Clip" else {})
    group, pad, kernel = {"padded": (1, 1, 3), "depthwise": (CHANNELS, 1, 3)}.get(reader, (1, 0, 1))
    _conv(g, "r", "p", CHANNELS, group=group, pad=pad, kernel=kernel)
    append(g, "GlobalAveragePool", ["p"], ["y"])
    g.outputs = ["y"]
    if reader == "float":
        append(g, "Sigmoid", ["r"], ["s"])
        g.outputs.append("s")
    return g


def _stream(float_reader: bool = False) -> Graph:
    """x -> 1x1 conv = s0 -> 1x1 expand, Relu = e, r -> 1x1 project = s1 -> s0 + s1 = s2 -> 1x1
    conv = p -> pool = y; with `float_reader`, a Sigmoid of s2 is an output too."""
    g = Graph("stream")
    g.add_input("x", (1, CHANNELS, 4, 4), "float32")
    _conv(g, "x", "s0", CHANNELS)
    _conv(g, "s0", "e", CHANNELS)
    append(g, "Relu", ["e"], ["r"])
    _conv(g, "r", "s1", CHANNELS)
    append(g, "Add", ["s0", "s1"], ["s2"])
    _conv(g, "s2", "p", CHANNELS)
    append(g, "GlobalAveragePool", ["p"], ["y"])
    g.outputs = ["y"]
    if float_reader:
        append(g, "Sigmoid", ["s2"], ["sig"])
        g.outputs.append("sig")
    return g


def _plan(g: Graph, keep: str | None = None, **options: bool) -> Plan:
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.normal(0.0, 1.0, g.values["x"].shape).astype(np.float32)} for _ in range(4)]
    calibrated = calibrate(g, feeds, rounding="nearest")
    keep_float = None if keep is None else (lambda graph, node: node.outputs[0] == keep)
    return static_plan(calibrated, "minmax", keep_float=keep_float, **options)


# -- which values qualify --------------------------------------------------------------------------


def test_a_depthwise_output_read_only_by_group1_convolutions_takes_channel_scales() -> None:
    assert channel_scaled_values(_depthwise()) == ["r"]
    assert channel_scaled_values(_depthwise(reader="padded")) == ["r"]  # padding reads zeros: fine
    assert channel_scaled_values(_depthwise(reader="depthwise")) == []  # could not fold the scales
    assert channel_scaled_values(_depthwise(reader="float")) == []  # could not be dequantized
    assert channel_scaled_values(_depthwise(), kept={"d"}) == []  # its producer stays float
    assert channel_scaled_values(_depthwise(), kept={"p"}) == []  # its reader stays float


def test_a_stage_qualifies_when_every_reader_is_an_add_of_the_stage_or_folds() -> None:
    stage = ["s0", "s1", "s2"]
    assert channel_scaled_streams(_stream(), stage) == [stage]
    assert channel_scaled_streams(_stream(float_reader=True), stage) == []  # s2 is read in float
    assert channel_scaled_streams(_stream(), stage, kept={"s0"}) == []  # its producer stays float
    assert channel_scaled_streams(_stream(), stage, kept={"p"}) == []  # the reader stays float


def test_only_nonnegative_outputs_that_unpadded_or_grouped_convolutions_read_are_unsigned() -> None:
    assert unsigned_values(_depthwise()) == ["r"]
    assert unsigned_values(_depthwise("Clip")) == ["r"]
    assert unsigned_values(_depthwise(reader="depthwise")) == ["r"]  # padding reads the code of zero
    assert unsigned_values(_depthwise("Clip", clip_min=-1.0)) == []  # may be negative
    assert unsigned_values(_depthwise(reader="padded")) == []  # the accelerator could not pad with -128
    assert unsigned_values(_depthwise(reader="float")) == []  # could not be dequantized
    assert unsigned_values(_depthwise(), kept={"d"}) == ["r"]  # the producer stays float: a Quantize follows
    assert unsigned_values(_depthwise(), kept={"p"}) == []  # the reader stays float
    assert unsigned_values(_stream()) == ["r"]  # the expand output, read by the 1x1 projection
    assert unsigned_values(small_cnn()) == []  # its Relu outputs feed padded convolutions and an add


# -- the records static quantization plans -------------------------------------------------------------


def test_a_depthwise_output_read_by_a_pointwise_convolution_is_per_channel_and_unsigned() -> None:
    plan = _plan(_depthwise())
    r = plan.codings["r"]
    assert r.channel_scales is not None and r.channel_scales.shape == (CHANNELS,)
    assert r.unsigned and not r.stream and r.zero_point == -UNSIGNED_OFFSET
    assert r.step == 1.0 and not r.dequantizable  # its reader folds the scales
    np.testing.assert_array_equal(r.folded, r.channel_scales)
    for name in ("x", "d", "p"):  # one scale each, signed; y is the graph's output: float
        assert plan.codings[name].channel_scales is None and plan.codings[name].zero_point == 0
    assert "y" not in plan.codings


def test_the_options_turn_the_codings_off() -> None:
    assert _plan(_depthwise(), per_channel=False).codings["r"].channel_scales is None
    assert not _plan(_depthwise(), unsigned=False).codings["r"].unsigned
    plain = _plan(_depthwise(), per_channel=False, unsigned=False).codings["r"]
    assert plain.dequantizable and plain.step == plain.scale


def test_an_unsigned_value_takes_255_steps() -> None:
    signed, wide = (_plan(_depthwise(), per_channel=False, unsigned=u).codings["r"] for u in (False, True))
    assert wide.scale == pytest.approx(signed.scale * 127 / 255, rel=1e-6)


def test_a_kept_float_producer_leaves_its_output_unsigned_with_one_scale() -> None:
    plan = _plan(_depthwise(), keep="d")
    r = plan.codings["r"]
    assert r.unsigned and r.channel_scales is None and r.step == r.scale  # entered by a Quantize
    assert plan.keep_float == frozenset({"d"})


def test_a_kept_float_reader_leaves_the_value_plain() -> None:
    r = _plan(_depthwise(), keep="p").codings["r"]
    assert r.dequantizable and r.step == r.scale


def test_a_stream_stage_shares_one_profile_and_steps_by_its_factors() -> None:
    plan = _plan(_stream())
    stage = [plan.codings[v] for v in ("s0", "s1", "s2")]
    for coding in stage:
        assert coding.stream and not coding.unsigned and coding.step == coding.scale
        np.testing.assert_allclose(coding.folded, stage[0].folded, rtol=1e-6)
    assert plan.codings["r"].unsigned and plan.codings["r"].channel_scales is None
    assert not any(plan.codings[v].stream for v in ("x", "e", "r", "p"))


def test_a_stream_read_in_float_keeps_one_scale_per_value() -> None:
    plan = _plan(_stream(float_reader=True))
    assert all(plan.codings[v].dequantizable for v in ("s0", "s1", "s2"))


# -- the records ---------------------------------------------------------------------------------------


def test_codings_make_one_record_per_scale() -> None:
    scales = np.array([0.5, 0.25])
    found = codings({"a": 0.1, "b": 0.2, "c": 0.3}, {"b": scales, "c": scales * 0.3}, streams=["c", "a"],
                    unsigned=["b"])
    a, b, c = found["a"], found["b"], found["c"]
    # a is no stream value without channel scales
    assert (a.scale, a.channel_scales, a.stream, a.unsigned) == (0.1, None, False, False)
    assert b.unsigned and not b.stream and b.step == 1.0
    assert c.stream and c.step == 0.3
    np.testing.assert_allclose(c.folded, scales)


def test_codings_refuse_a_value_without_a_scale() -> None:
    with pytest.raises(ValueError, match="b has no scale"):
        codings({"a": 0.1}, unsigned=["b"])


def test_a_record_keeps_its_contract() -> None:
    with pytest.raises(ValueError, match="stream value's coding needs its channel scales"):
        Coding(0.1, stream=True)
    with pytest.raises(ValueError, match="only a value with channel scales"):
        _ = Coding(0.1).folded
    assert Coding(0.1).dequantizable and not Coding(0.1, unsigned=True).dequantizable
    assert Plan(codings({"a": 0.1})).scale("a") == 0.1 and Plan({}).scale("a") is None
