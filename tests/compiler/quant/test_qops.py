"""The quantized-graph ops' evaluators against independent references: Python integers (which
never overflow, so wrapping is written out by hand), naive loops, and hand-derived values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.errors import GraphError
from compiler.graph import OPS, Graph, const, make_node, run_graph, verify
from compiler.graph.builder import append


def wrap(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def epilogue(t: int, bias: int, mult: int, shift: int, lo: int, hi: int) -> int:
    """The contract's requantization of one value, in Python integers (>> floors: arithmetic)."""
    t = wrap(wrap(t + bias) * mult)
    if shift > 0:
        t = wrap(t + 2 ** (shift - 1)) >> shift
    return min(max(t, lo), hi)


def naive_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int, group: int) -> np.ndarray:
    n, _, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x.astype(object), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    out = np.zeros((n, k, oh, ow), object)
    per = k // group
    for b, o, i, j in itertools.product(range(n), range(k), range(oh), range(ow)):
        g = o // per
        patch = xp[b, g * cg : (g + 1) * cg, i * stride : i * stride + r, j * stride : j * stride + s]
        out[b, o, i, j] = int((patch * w[o].astype(object)).sum())
    return out


def run_op(op: str, arrays: dict[str, np.ndarray], consts: dict[str, np.ndarray], attrs: dict) -> np.ndarray:
    g = Graph()
    for name, a in arrays.items():
        g.add_input(name, a.shape, a.dtype.name)
    for name, a in consts.items():
        g.add_value(const(name, a))
    append(g, op, [*arrays, *consts], ["y"], attrs)
    g.outputs = ["y"]
    verify(g)
    return run_graph(g, arrays)["y"]


@pytest.mark.parametrize("group,stride,pad", [(1, 1, 1), (1, 2, 0), (2, 1, 1), (6, 2, 1)], ids=str)
def test_qconv_matches_python_integers(group: int, stride: int, pad: int) -> None:
    rng = np.random.default_rng(group * 10 + stride)
    x = rng.integers(-128, 128, (1, 6, 5, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 6 // group, 3, 3)).astype(np.int8)
    bias = rng.integers(-5000, 5000, 6).astype(np.int32)
    mult = rng.integers(-3000, 3000, 6).astype(np.int32)
    shift, lo, hi = 11, -100, 90
    attrs = {"strides": (stride, stride), "pads": (pad,) * 4, "group": group, "shift": shift, "clip_lo": lo,
             "clip_hi": hi, "out_scale": 0.1}
    got = run_op("QConv", {"x": x}, {"w": w, "b": bias, "m": mult}, attrs)
    acc = naive_conv(x, w, stride, pad, group)
    want = np.vectorize(lambda t, k: epilogue(t, int(bias[k]), int(mult[k]), shift, lo, hi), otypes=[object])(
        acc, np.arange(6).reshape(1, 6, 1, 1)
    )
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want.astype(np.int64))


def test_qgemm_matches_python_integers() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (3, 37)).astype(np.int8)
    w = rng.integers(-128, 128, (5, 37)).astype(np.int8)
    bias = rng.integers(-(2**20), 2**20, 5).astype(np.int32)
    mult = rng.integers(1, 2**12, 5).astype(np.int32)
    got = run_op("QGemm", {"x": x}, {"w": w, "b": bias, "m": mult}, {"shift": 17, "out_scale": 1.0})

    def row(i: int, k: int) -> int:
        acc = sum(int(a) * int(b) for a, b in zip(x[i], w[k], strict=True))
        return epilogue(acc, int(bias[k]), int(mult[k]), 17, -128, 127)

    want = [[row(i, k) for k in range(5)] for i in range(3)]
    np.testing.assert_array_equal(got, np.array(want))


def test_epilogue_wraps_at_32_bits_like_the_alu() -> None:
    # acc = 127 * 127 = 16129; acc + bias = 2**31 + 129 wraps to -2**31 + 129; times 2 wraps to 258;
    # (258 + 2) >> 2 = 65. Without wrapping the result would saturate at 127.
    x = np.array([[127]], np.int8)
    w = np.array([[127]], np.int8)
    bias = np.array([2**31 - 16000], np.int32)
    mult = np.array([2], np.int32)
    got = run_op("QGemm", {"x": x}, {"w": w, "b": bias, "m": mult}, {"shift": 2})
    assert wrap(16129 + 2**31 - 16000) == -(2**31) + 129 and wrap((-(2**31) + 129) * 2) == 258
    assert got[0, 0] == 65 == epilogue(16129, 2**31 - 16000, 2, 2, -128, 127)
    # the rounding add wraps too: t = 2**31 - 1 after the multiply, + 2**(shift - 1)
    one = np.array([[1]], np.int8)
    vectors = {"w": one, "b": np.array([2**31 - 2], np.int32), "m": np.array([1], np.int32)}
    got = run_op("QGemm", {"x": one}, vectors, {"shift": 1})
    assert got[0, 0] == -128  # (2**31 - 1 + 1) wraps to -2**31; >> 1 = -2**30; clipped


@pytest.mark.parametrize(
    "t,shift,want",
    [
        (5, 1, 3),
        (-5, 1, -2),
        (-3, 1, -1),
        (-6, 2, -1),
        (-7, 2, -2),
        (6, 2, 2),
        (-1, 1, 0),
        (7, 0, 7),
        (-9, 3, -1),
    ],
)
def test_rounding_shift_of_negatives_rounds_half_up(t: int, shift: int, want: int) -> None:
    # QGemm with x = t, w = 1, no bias, mult 1: y = (t + 2**(shift-1)) >> shift = floor(t / 2**shift + 1/2)
    got = run_op("QGemm", {"x": np.array([[t]], np.int8)}, {"w": np.array([[1]], np.int8),
                 "b": np.zeros(1, np.int32), "m": np.ones(1, np.int32)}, {"shift": shift})
    assert got[0, 0] == want == int(np.floor(t / 2**shift + 0.5))


def test_qadd_hand_values() -> None:
    a = np.array([[[[100, -100, 127, -128]]]], np.int8)
    b = np.array([[[[20, 20, 127, -128]]]], np.int8)
    attrs = {"mult_a": 300, "mult_b": -500, "shift": 8, "clip_lo": -50, "clip_hi": 127, "out_scale": 0.5}
    got = run_op("QAdd", {"a": a, "b": b}, {}, attrs)
    # 100*300 - 20*500 = 20000 -> (20000 + 128) >> 8 = 78; -30000 - 10000 -> -157 -> clip -50;
    # 127*300 - 127*500 = -25400 -> -99 -> -50; -128*(300-500) = 25600 -> 100
    np.testing.assert_array_equal(got, [[[[78, -50, -50, 100]]]])
    for (x, y), g in zip(zip(a.ravel(), b.ravel(), strict=True), got.ravel(), strict=True):
        assert g == epilogue(int(x) * 300 + int(y) * -500, 0, 1, 8, -50, 127)


def test_qglobalavgpool_hand_values() -> None:
    x = np.arange(-8, 10, dtype=np.int8).reshape(1, 2, 3, 3)
    got = run_op("QGlobalAvgPool", {"x": x}, {}, {"mult": 7, "shift": 6, "out_scale": 1.0})
    # sums: -8..0 = -36, 1..9 = 45; * 7 = -252, 315; (+32) >> 6 = floor(-220/64) = -4, floor(347/64) = 5
    np.testing.assert_array_equal(got.ravel(), [-4, 5])
    assert got.shape == (1, 2, 1, 1)


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    scale = 0.5
    x = np.array([0.25, 0.75, 1.25, -0.25, -0.75, 63.0, 64.0, -64.5, 1000.0], np.float32)
    got = run_op("Quantize", {"x": x}, {}, {"scale": scale})
    np.testing.assert_array_equal(got, [0, 2, 2, 0, -2, 126, 127, -128, 127])
    back = run_op("Dequantize", {"q": got}, {}, {"scale": scale})
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, np.array([0, 1, 1, 0, -1, 63, 63.5, -64, 63.5], np.float32))


def test_dequantize_of_int32() -> None:
    got = run_op("Dequantize", {"q": np.array([-(2**31), 2**31 - 1], np.int32)}, {}, {"scale": 0.25})
    np.testing.assert_array_equal(got, np.float32([-(2**29), 2**29]))


def test_maxpool_on_int8_is_exact_with_padding() -> None:
    x = np.array([[[[-128, -100], [-120, -128]]]], np.int8)
    attrs = {"kernel_shape": (2, 2), "strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1)}
    got = run_op("MaxPool", {"x": x}, {}, attrs)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got[0, 0], [[-128, -100, -100], [-120, -100, -100], [-120, -120, -128]])


@pytest.mark.parametrize(
    "op,attrs,match",
    [
        ("QGemm", {"shift": 32}, r"shift 32 is not in \[0, 31\]"),
        ("QGemm", {"clip_lo": 5, "clip_hi": 4}, r"clip \[5, 4\] is not an ordered range"),
        ("QGemm", {"clip_hi": 128}, r"clip \[-128, 128\]"),
        ("QGemm", {"out_scale": 0.0}, r"out_scale 0.0 must be finite and > 0"),
        ("QAdd", {"mult_a": 1 << 31, "mult_b": 1}, r"mult_a 2147483648 does not fit int32"),
    ],
)
def test_attribute_checks(op: str, attrs: dict, match: str) -> None:
    g = Graph()
    g.add_input("x", (1, 4), "int8")
    if op == "QGemm":
        for name, a in {
            "w": np.zeros((2, 4), np.int8),
            "b": np.zeros(2, np.int32),
            "m": np.ones(2, np.int32),
        }.items():
            g.add_value(const(name, a))
        inputs = ["x", "w", "b", "m"]
    else:
        inputs = ["x", "x"]
    with pytest.raises(GraphError, match=match):
        OPS[op].infer([g.values[i] for i in inputs], make_node(op, inputs, ["y"], attrs).attrs)


@pytest.mark.parametrize("pad_value", [128, -129])
def test_a_qconv_pad_value_must_be_an_int8(pad_value: int) -> None:
    g = Graph()
    g.add_input("x", (1, 2, 3, 3), "int8")
    g.add_value(const("w", np.zeros((2, 2, 3, 3), np.int8)))
    g.add_value(const("b", np.zeros(2, np.int32)))
    g.add_value(const("m", np.ones(2, np.int32)))
    attrs = {"strides": (1, 1), "pads": (1, 1, 1, 1), "pad_value": pad_value}
    node = make_node("QConv", ["x", "w", "b", "m"], ["y"], attrs)
    with pytest.raises(GraphError, match=rf"pad_value {pad_value} is not an int8"):
        OPS["QConv"].infer([g.values[i] for i in node.inputs], node.attrs)


def test_quantize_adds_its_zero_point_and_saturates() -> None:
    x = np.array([0.0, 0.125, 0.375, 6.0, 70.0, -0.5], np.float32)
    got = run_op("Quantize", {"x": x}, {}, {"scale": 0.25, "zero_point": -128})
    # x / 0.25 rounds half to even: 0, 0 (0.5), 2 (1.5), 24, 280, -2; minus 128, saturated
    np.testing.assert_array_equal(got, [-128, -128, -126, -104, 127, -128])
    g = Graph()
    g.add_input("x", (2,), "float32")
    node = make_node("Quantize", ["x"], ["y"], {"scale": 0.1, "zero_point": 128})
    with pytest.raises(GraphError, match=r"zero_point 128 is not an int8"):
        OPS["Quantize"].infer([g.values["x"]], node.attrs)


def test_a_pool_multiplier_must_be_an_immediate() -> None:
    g = Graph()
    g.add_input("x", (1, 4, 2, 2), "int8")
    node = make_node("QGlobalAvgPool", ["x"], ["y"], {"mult": 32768})
    with pytest.raises(GraphError, match=r"mult 32768 does not fit a 16-bit immediate \(\|m\| <= 32767\)"):
        OPS["QGlobalAvgPool"].infer([g.values["x"]], node.attrs)


def test_weights_and_vectors_must_be_int_constants() -> None:
    g = Graph()
    g.add_input("x", (1, 4), "int8")
    g.add_input("w", (2, 4), "int8")
    g.add_value(const("b", np.zeros(2, np.int64)))
    g.add_value(const("m", np.ones(2, np.int32)))
    node = make_node("QGemm", ["x", "w", "b", "m"], ["y"])
    with pytest.raises(GraphError, match="weight w must be a constant"):
        OPS["QGemm"].infer([g.values[i] for i in node.inputs], node.attrs)
    g.values["w"] = const("w", np.zeros((2, 4), np.int8))
    with pytest.raises(GraphError, match="bias b has dtype int64, expected int32"):
        OPS["QGemm"].infer([g.values[i] for i in node.inputs], node.attrs)


def _precise_gemm(mult: list[int], lo_t: list[int], hi_t: list[int], attrs: dict, x: np.ndarray,
                  w: np.ndarray, bias: list[int]) -> np.ndarray:
    consts = {"w": w, "b": np.array(bias, np.int32), "m": np.array(mult, np.int32),
              "lo": np.array(lo_t, np.int32), "hi": np.array(hi_t, np.int32)}
    return run_op("QGemm", {"x": x}, consts, attrs)


def test_precise_requantization_hand_values() -> None:
    # t = acc + bias, clamped to [lo, hi], then (t * m + 2**7) >> 8 exactly
    x = np.array([[1], [-1], [100]], np.int8)
    w = np.array([[50], [-3]], np.int8)
    attrs = {"shift": 8, "split": 3, "clip_lo": -10, "clip_hi": 10}
    got = _precise_gemm([100, 77], [-25, -33], [25, 34], attrs, x, w, [3, 0])
    # channel 0: t = 53 -> 25: (2500 + 128) >> 8 = 10; t = -47 -> -25: (-2500 + 128) >> 8 = -10;
    #            t = 5003 -> 25: 10.  channel 1 (77): t = -3: (-231 + 128) >> 8 = -1; t = 3: 1;
    #            t = -300 -> -33: (-2541 + 128) >> 8 = -10
    np.testing.assert_array_equal(got, [[10, -1], [-10, 1], [10, -10]])
    t = np.clip(np.array([[53, -3], [-47, 3], [5003, -300]]), [-25, -33], [25, 34])
    np.testing.assert_array_equal(got, np.clip((t * np.array([100, 77]) + 128) >> 8, -10, 10))


@pytest.mark.parametrize(
    "mult,lo_t,hi_t,attrs,match",
    [
        ([100, 77], [-25, -33], [25, 34], {"shift": 8, "split": -1}, r"split -1 must be >= 0"),
        ([100, 77], [-25, -33], [25, 34], {"shift": 8, "split": 8}, r"split 8 is not in \[1, shift 8\)"),
        ([100, -77], [-25, -33], [25, 34], {"shift": 8, "split": 3}, r"needs positive multipliers, not -77"),
        ([100, 77], [25, -33], [-25, 34], {"shift": 8, "split": 3}, r"clamp \[25, -25\] of channel 0"),
        ([100, 77], [-25, -33], [25, 34], {"shift": 8, "split": 3, "clip_hi": 5},
         r"channel 0: clamp bound 25 gives 10, outside the clip \(-128, 5\)"),
        ([2**30, 77], [-25, -33], [25, 34], {"shift": 31, "split": 1},
         r"channel 0: the 32-bit multiply of t = -25 by 1073741824 wraps \(split 1\)"),
    ],
)
def test_precise_parameter_checks(mult: list[int], lo_t: list[int], hi_t: list[int], attrs: dict,
                                  match: str) -> None:
    x, w = np.zeros((1, 1), np.int8), np.ones((2, 1), np.int8)
    with pytest.raises(GraphError, match=match):
        _precise_gemm(mult, lo_t, hi_t, attrs, x, w, [0, 0])


def test_precise_mode_needs_its_inputs() -> None:
    x, w = np.zeros((1, 1), np.int8), np.ones((2, 1), np.int8)
    consts = {"w": w, "b": np.zeros(2, np.int32), "m": np.ones(2, np.int32)}
    with pytest.raises(GraphError, match=r"split 3 \(precise requantization\) needs the inputs clamp_lo and "
                                         r"clamp_hi after mult, 6 inputs, not 4"):
        run_op("QGemm", {"x": x}, consts, {"shift": 8, "split": 3})
    extra = {**consts, "lo": np.zeros(2, np.int32), "hi": np.zeros(2, np.int32)}
    with pytest.raises(GraphError, match=r"QGemm takes 6 inputs only with split > 0"):
        run_op("QGemm", {"x": x}, extra, {"shift": 8})
    with pytest.raises(GraphError, match=r"clamp_lo lo has dtype int64, expected int32"):
        run_op("QGemm", {"x": x}, {**extra, "lo": np.zeros(2, np.int64)}, {"shift": 8, "split": 3})


def test_precise_qconv_matches_python_integers() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 4, 5, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 4, 3, 3)).astype(np.int8)
    bias = rng.integers(-5000, 5000, 3).astype(np.int32)
    mult = np.array([2**20 + 12345, 3 * 2**19 + 7, 2**21 - 1], np.int32)
    shift, split = 31, 12
    lo_t, hi_t = [(-(128 * 2**shift) // int(m)) for m in mult], [(127 * 2**shift) // int(m) for m in mult]
    consts = {"w": w, "b": bias, "m": mult, "lo": np.array(lo_t, np.int32), "hi": np.array(hi_t, np.int32)}
    attrs = {"strides": (1, 1), "pads": (1,) * 4, "group": 1, "shift": shift, "split": split}
    got = run_op("QConv", {"x": x}, consts, attrs)
    acc = naive_conv(x, w, 1, 1, 1)

    def one(t: int, k: int) -> int:
        t = min(max(wrap(t + int(bias[k])), lo_t[k]), hi_t[k])
        return min(max((t * int(mult[k]) + 2 ** (shift - 1)) >> shift, -128), 127)

    want = np.vectorize(one, otypes=[object])(acc, np.arange(3).reshape(1, 3, 1, 1))
    np.testing.assert_array_equal(got, want.astype(np.int64))
