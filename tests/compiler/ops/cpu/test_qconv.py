"""The host's QConv (qconv2d) against its numpy reference, bit for bit: every group form and
schedule, strides, asymmetric padding, 32-bit wrapping and rounding; and against the graph's
QConv evaluator, in the plain and the precise requantization."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.opdefs import OPS, make_attrs
from compiler.graph.opdefs.qops import conv_acc, precise_requantize
from compiler.ops.cpu import QConv2d
from compiler.ops.cpu.qconv import conv_reference
from compiler.ops.cpu.qops import wrap32
from tests.compiler.ops.cpu.test_qops import (
    PRECISE_MODES,
    assert_clamps_and_clips,
    graph_output,
    precise_attrs,
    precise_inputs,
)
from tests.compiler.ops.cpu.util import (
    BAD_CONV_PARAMETERS,
    CONV,
    assert_conv_parameters_normalise,
    kernel_of,
)

INT32 = np.iinfo(np.int32)


def assert_exact(op: QConv2d, inputs: list[np.ndarray]) -> np.ndarray:
    got = kernel_of(op)(*inputs)
    ref = op.reference(*inputs)
    assert isinstance(got, np.ndarray) and got.dtype == np.int8 and got.shape == op.out_shape
    assert np.array_equal(got, ref), f"{op}: {int(np.sum(got != ref))} of {ref.size} elements differ"
    return got


def spread_shift(op: QConv2d) -> int:
    """A shift that maps this convolution's typical |acc * mult| into the int8 range, so the
    outputs are mostly not clipped (full-range data and weights, |mult| <= 2**12)."""
    _, cg, r, s = op.weight_shape
    typical = 5500 * np.sqrt(cg * r * s) * 2**11  # std of an int8 product is about 5500
    return int(min(31, max(0, np.ceil(np.log2(typical / 64)))))


@st.composite
def qconvs(draw):  # type: ignore[no-untyped-def]
    form = draw(st.sampled_from(["dense", "depthwise", "multiplier", "grouped"]))
    groups = draw(st.sampled_from([1, 2, 3, 5]))
    if form == "dense":
        c, group, k = draw(st.sampled_from([1, 2, 3, 4, 7])), 1, draw(st.sampled_from([1, 3, 4, 8, 17]))
    elif form == "depthwise":
        c = group = k = draw(st.sampled_from([1, 3, 4, 8, 16]))
    elif form == "multiplier":  # K = C * m, one input channel per group
        c = group = groups
        k = c * draw(st.integers(2, 3))
    else:
        group = groups
        c, k = group * draw(st.integers(1, 3)), group * draw(st.integers(1, 3))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, r - pads[0] - pads[2]), 12))
    w = draw(st.integers(max(1, s - pads[1] - pads[3]), 12))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    legal = ["auto", "rows"] + ["channels"] * (group == 1) + ["depthwise"] * (c == k == group)
    op = QConv2d((draw(st.integers(1, 2)), c, h, w), (k, c // group, r, s), strides, pads, group,
                 strategy=draw(st.sampled_from(legal)),
                 pad_value=draw(st.sampled_from([0, -128, 37])))
    lo = draw(st.integers(-128, 0))
    return dataclasses.replace(op, shift=spread_shift(op), clip_lo=lo, clip_hi=draw(st.integers(lo, 127)))


@settings(max_examples=20, deadline=None)
@given(qconvs(), st.integers(0, 2**16))
def test_generated_convolutions_are_exact(op, seed):
    assert_exact(op, op.random_inputs(seed))


# Shape classes of the zoo models, smaller images; each compiled once, then fed many values.
ZOO = {
    "resnet18 conv1": QConv2d((1, 3, 20, 20), (64, 3, 7, 7), 2, 3, shift=22),  # channels
    "mobilenetv2 first conv": QConv2d((1, 3, 17, 17), (32, 3, 3, 3), 2, (0, 0, 1, 1), shift=20),
    "depthwise s1 wide": QConv2d((1, 16, 32, 32), (16, 1, 3, 3), 1, 1, 16, shift=19),  # rows, x16
    "depthwise s1 width 40": QConv2d((1, 8, 40, 40), (8, 1, 3, 3), 1, 1, 8, shift=19),  # rows, x8
    "depthwise s2 wide": QConv2d((1, 8, 66, 66), (8, 1, 3, 3), 2, 1, 8, shift=19),  # rows
    "depthwise s1 narrow": QConv2d((1, 48, 14, 14), (48, 1, 3, 3), 1, 1, 48, shift=19),  # depthwise
    "depthwise s2 narrow": QConv2d((1, 32, 15, 15), (32, 1, 3, 3), 2, (0, 0, 1, 1), 32, shift=19),
    "depthwise 7x7": QConv2d((1, 40, 7, 7), (40, 1, 3, 3), 1, 1, 40, shift=19),
    "grouped": QConv2d((1, 12, 10, 10), (8, 3, 3, 3), 1, 1, 4, shift=21),
}


def test_zoo_shape_classes_take_the_intended_schedules():
    strategies = {name: op.chosen_strategy for name, op in ZOO.items()}
    assert strategies == {
        "resnet18 conv1": "channels", "mobilenetv2 first conv": "channels",
        "depthwise s1 wide": "rows", "depthwise s1 width 40": "rows", "depthwise s2 wide": "rows",
        "depthwise s1 narrow": "depthwise", "depthwise s2 narrow": "depthwise",
        "depthwise 7x7": "depthwise", "grouped": "rows"}


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_shape_classes_are_exact_and_compile_quietly(name, capfd):
    op = ZOO[name]
    outs = [assert_exact(op, op.random_inputs(seed)) for seed in range(3)]
    assert len(np.unique(outs[0])) > 64  # most outputs in range: the check is not all clipping
    assert "not vectorized" not in capfd.readouterr().err  # LLVM followed every vectorize hint


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(list(ZOO)), st.integers(0, 2**16), st.sampled_from(["realistic", "full"]))
def test_one_kernel_serves_any_weights_and_vectors(name, seed, vectors):
    """bias and mult are arguments: full-range int32 ones make every step wrap."""
    op = ZOO[name]
    inputs = op.random_inputs(seed)
    if vectors == "full":
        rng = np.random.default_rng(seed)
        k = op.weight_shape[0]
        inputs[2:] = [rng.integers(INT32.min, INT32.max, k, endpoint=True, dtype=np.int32) for _ in range(2)]
    assert_exact(op, inputs)


def test_wrapping_and_rounding_match_hand_computed_values():
    """1x1 convolution of one channel: acc = data * weight, so each step can be aimed at."""
    op = QConv2d((1, 1, 1, 8), (8, 1, 1, 1), shift=4, clip_lo=-128, clip_hi=127)
    data = np.ones((1, 1, 1, 8), np.int8)
    weight = np.array([1, 1, 1, 1, 1, -1, 2, 0], np.int8).reshape(8, 1, 1, 1)
    bias = np.array([-41, -40, -24, INT32.max, INT32.max - 1, INT32.min, INT32.max - 3, 7], np.int32)
    mult = np.array([1, 1, 1, 1, 1, 1, 2, -(2**31)], np.int32)
    t = [(int(w) + int(b)) * int(m) for w, b, m in zip(weight.flat, bias, mult, strict=True)]
    t = [((v + 2**31) % 2**32) - 2**31 for v in t]  # (acc + bias) * mult, wrapped
    assert t == [-40, -39, -23, INT32.min, INT32.max, INT32.max, -4, INT32.min]
    # then (t + 8) >> 4: -2.5 rounds half up to -2, -2.44 to -2, -1.44 to -1, -0.25 to 0; MIN
    # clips to -128, and MAX + 8 wraps to MIN + 7, which clips to -128 too
    expected = [-2, -2, -1, -128, -128, -128, 0, -128]
    got = assert_exact(op, [data, weight, bias, mult])
    assert got[0, :, 0, 0].tolist() == expected


def test_accumulation_wraps_at_32_bits():
    """140000 products of (-128)*(-128) sum to 2.29e9, past int32: the accumulator wraps to
    -2.0e9 (clipped to -128), where a saturating or 64-bit one would give +127."""
    c = 140_000
    op = QConv2d((1, c, 1, 1), (2, c, 1, 1), shift=0, clip_lo=-128, clip_hi=127)
    data = np.full((1, c, 1, 1), -128, np.int8)
    weight = np.full((2, c, 1, 1), -128, np.int8)
    weight[1, ::2] = 127  # the second output stays in range: 70000 * (16384 - 16256) > 0
    assert conv_reference(data, weight, (1, 1), (0, 0, 0, 0), 1)[0, 0, 0, 0] == c * 16384 > INT32.max
    got = assert_exact(op, [data, weight, np.zeros(2, np.int32), np.ones(2, np.int32)])
    assert got[0, :, 0, 0].tolist() == [-128, 127]


def test_clip_bounds_outside_int8_keep_the_low_bits():
    op = QConv2d((1, 1, 1, 1), (3, 1, 1, 1), shift=0, clip_lo=-300, clip_hi=300)
    inputs = [np.zeros((1, 1, 1, 1), np.int8), np.zeros((3, 1, 1, 1), np.int8),
              np.array([-1000, 200, 1000], np.int32), np.ones(3, np.int32)]
    got = assert_exact(op, inputs)
    assert got[0, :, 0, 0].tolist() == [-300 + 256, 200 - 256, 300 - 256]


def test_padding_reads_the_pad_value():
    """A 3x3 kernel over a 1x1 image padded by 1, with weight 1 at the centre (which reads the
    data) and at one corner (which reads the pad value: -128 is the code of an unsigned value's
    zero), 0 elsewhere."""
    data = np.array([[[[5]]]], np.int8)
    vectors = [np.zeros(1, np.int32), np.ones(1, np.int32)]
    weight = np.zeros((1, 1, 3, 3), np.int8)
    weight[0, 0, 1, 1] = weight[0, 0, 0, 2] = 1
    for fill, strategy in ((0, "rows"), (-128, "rows"), (-128, "channels"), (37, "depthwise")):
        op = QConv2d((1, 1, 1, 1), (1, 1, 3, 3), pads=1, shift=0, pad_value=fill, strategy=strategy)
        assert int(assert_exact(op, [data, weight, *vectors])[0, 0, 0, 0]) == 5 + fill
        (want,) = OPS["QConv"].evaluate([data, weight, *vectors], make_attrs("QConv", conv_attrs(op)))
        assert int(want[0, 0, 0, 0]) == 5 + fill
    with pytest.raises(ValueError, match=r"qconv2d: pad_value must be an int in \[-128, 127\], not 128"):
        QConv2d((1, 1, 1, 1), (1, 1, 3, 3), pads=1, pad_value=128)


@pytest.mark.parametrize("pad_value", [0, -128])
@pytest.mark.parametrize("name", ["resnet18 conv1", "depthwise s2 narrow", "grouped", "depthwise s1 wide"])
def test_equals_the_graph_evaluator(name, pad_value):
    op = dataclasses.replace(ZOO[name], pad_value=pad_value)
    names = ("strides", "pads", "group", "shift", "clip_lo", "clip_hi", "pad_value")
    attrs = make_attrs("QConv", {name: getattr(op, name) for name in names})
    for seed in range(2):
        inputs = op.random_inputs(seed + 10)
        (expected,) = OPS["QConv"].evaluate(inputs, attrs)
        assert np.array_equal(kernel_of(op)(*inputs), expected)


# -- precise requantization ----------------------------------------------------------------------


def conv_attrs(op: QConv2d) -> dict[str, object]:
    return {"strides": op.stride_hw, "pads": op.pad_tlbr, "group": op.group, "pad_value": op.pad_value}


def precise_case(op: QConv2d, mode: str, seed: int) -> tuple[QConv2d, list[np.ndarray], np.ndarray]:
    """`op` made precise, its inputs (precise_inputs) and the graph interpreter's output."""
    clip, taps = (op.clip_lo, op.clip_hi), int(np.prod(op.weight_shape[1:]))
    inputs, p = precise_inputs(op.random_inputs(seed), taps, clip, mode, seed)
    want = graph_output("QConv", inputs, conv_attrs(op) | precise_attrs(p, clip))
    return dataclasses.replace(op, shift=p.shift, precise=True), inputs, want


@settings(max_examples=12, deadline=None)
@given(qconvs(), st.sampled_from(PRECISE_MODES), st.integers(0, 2**16))
def test_precise_convolutions_equal_the_graph(op, mode, seed):
    precise, inputs, want = precise_case(op, mode, seed)
    assert np.array_equal(assert_exact(precise, inputs), want)


@pytest.mark.parametrize("mode", PRECISE_MODES)
@pytest.mark.parametrize("name", ["resnet18 conv1", "depthwise s1 wide", "depthwise s2 narrow", "grouped"])
def test_precise_zoo_shape_classes_clamp_clip_and_compile_quietly(name, mode, capfd):
    precise, inputs, want = precise_case(ZOO[name], mode, 3)
    assert precise.chosen_strategy == ZOO[name].chosen_strategy
    out = assert_exact(precise, inputs)
    assert np.array_equal(out, want)
    t = wrap32(conv_acc(*inputs[:2], precise.stride_hw, precise.pad_tlbr, precise.group) +
               inputs[2].astype(np.int64)[:, None, None])
    assert_clamps_and_clips(t, inputs, out, (precise.clip_lo, precise.clip_hi), axis=1)
    assert "not vectorized" not in capfd.readouterr().err


@settings(max_examples=6, deadline=None)
@given(st.sampled_from(list(ZOO)), st.integers(0, 2**16))
def test_precise_kernel_is_exact_for_any_int32_vectors(name, seed):
    """Full-range multipliers of both signs and clamp bounds, loose or tight, beyond what the
    contract allows: the int64 product is exact for all, and the clip acts where the clamp does not."""
    op = dataclasses.replace(ZOO[name], precise=True)
    data, weight, bias, *_ = op.random_inputs(seed)
    rng = np.random.default_rng(seed)
    mult, *clamps = (rng.integers(INT32.min, INT32.max, op.weight_shape[0], endpoint=True, dtype=np.int32)
                     for _ in range(3))
    lo_t, hi_t = np.minimum(*clamps), np.maximum(*clamps)
    acc = conv_acc(data, weight, op.stride_hw, op.pad_tlbr, op.group)
    want = precise_requantize(acc, bias, mult, lo_t, hi_t, op.shift, op.clip_lo, op.clip_hi)
    assert np.array_equal(assert_exact(op, [data, weight, bias, mult, lo_t, hi_t]), want)


def test_parameters_normalise_so_equal_convolutions_share_a_kernel():
    assert_conv_parameters_normalise(QConv2d)


@pytest.mark.parametrize("params,message", BAD_CONV_PARAMETERS + [
    (CONV | dict(shift=32), r"shift must be an int in \[0, 31\], not 32"),
    (CONV | dict(clip_lo=5, clip_hi=4), "clip_lo 5 is above clip_hi 4"),
    (CONV | dict(precise="yes"), "precise must be a bool, not 'yes'"),
    (CONV | dict(precise=True),
     r"precise requantization needs shift >= 1 \(it rounds by 2\*\*\(shift - 1\)\), not 0"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message) as err:
        QConv2d(**params)
    assert str(err.value).startswith("qconv2d: ")


@pytest.mark.parametrize("channels", [1, 2, 5, 16])
@pytest.mark.parametrize("packed", [False, True])
def test_register_tiles_reduce_channel_pairs_exactly(channels, packed):
    """The "channels" schedule's int8 tile reduces channel pairs (int16, vpmaddwd's form); an
    odd C's missing channel meets a zero weight, and a padding value of -128 still pads."""
    op = QConv2d((1, channels, 9, 10), (16, channels, 3, 3), (1, 2), (1, 0, 2, 1), shift=12,
                 pad_value=-128, packed=packed)
    assert op.pairs and op.packed_dtype == "int16"
    assert op.packed_weight_shape == (2, (channels + 1) // 2, 3, 3, 8, 2)
    assert_exact(op, op.random_inputs(channels))


def test_a_packed_pair_weight_unpacks_to_the_original():
    op = QConv2d((1, 5, 6, 6), (16, 5, 3, 3), 1, 1, shift=12, packed=True)
    weight = np.random.default_rng(3).integers(-128, 128, op.weight_shape).astype(np.int8)
    packed = op.pack_weight(weight)
    assert packed.dtype == np.int16 and packed.shape == op.packed_weight_shape
    assert packed[1, 1, 0, 2, 3, 1] == weight[8 + 3, 2 * 1 + 1, 0, 2]  # block 1, pair 1, lane 3, second
    assert np.all(packed[:, 2, :, :, :, 1] == 0)  # channel 5 of 5: padding
    assert np.array_equal(op.logical_weight(packed), weight)


def test_the_int8_register_tile_multiplies_with_vpmaddwd():
    import llvmlite.binding as llvm

    from compiler.target.cpu import host_target

    target = host_target()
    if not target.has("avx2"):
        pytest.skip("vpmaddwd on 256-bit vectors needs AVX2")
    op = QConv2d((1, 32, 8, 8), (16, 32, 3, 3), 1, 1, shift=12, packed=True)
    ir_text = kernel_of(op).optimized_ir
    if not ir_text:
        pytest.skip("the kernel came from the disk cache (no IR to inspect)")
    asm = target.machine(3).emit_assembly(llvm.parse_assembly(ir_text))
    assert "vpmaddwd" in asm
