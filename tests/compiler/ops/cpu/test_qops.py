"""The host's QGemm, QAdd and QGlobalAvgPool against their numpy references, bit for bit
(32-bit wrapping, rounding half up, clipping), the references against hand-computed values,
and the kernels against the graph's evaluators; QGemm's precise requantization against the
graph interpreter on parameters made as a QDQ import makes them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph import Graph, const, verify
from compiler.graph.builder import append
from compiler.graph.interp import evaluate_node
from compiler.graph.opdefs import OPS, make_attrs
from compiler.graph.opdefs.qops import gemm_acc, precise_requantize
from compiler.ops.cpu import HostKernel, HostOp, QAdd, QGemm, QGlobalAvgPool, compile_host_op
from compiler.ops.cpu.qops import requant_reference, wrap32
from compiler.quant.requant import PreciseRequant, precise_requant
from tests.compiler.ops.cpu.util import SIZES

INT32 = np.iinfo(np.int32)
CLIPS = st.sampled_from([(-128, 127), (0, 127), (-128, -1), (-20, 30)])


def kernel_of(op: HostOp) -> HostKernel:
    """The registry's kernel of `op`: compiled once per distinct parameters in the session."""
    return compile_host_op(op.op, **{f.name: getattr(op, f.name) for f in dataclasses.fields(op)})  # type: ignore[arg-type]


def assert_exact(op: HostOp, inputs: list[np.ndarray]) -> np.ndarray:
    got = kernel_of(op)(*inputs)
    ref = op.reference(*inputs)
    assert isinstance(got, np.ndarray) and got.dtype == np.int8 and got.shape == ref.shape
    assert np.array_equal(got, ref), f"{op}: {int(np.sum(got != ref))} of {ref.size} elements differ"
    return got


def full_range_int32(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(INT32.min, INT32.max, n, endpoint=True, dtype=np.int32)


# -- the shared requantization ------------------------------------------------------------------


def test_requantization_reference_by_hand():
    t = np.array([5, -5, -6, 6, -7, INT32.max, INT32.min, 300, -300, 24], np.int64)
    # shift 1: (t + 1) >> 1, half up: 2.5 -> 3, -2.5 -> -2, -3 -> -3, 3, -3.5 -> -3, MAX + 1 wraps
    # to MIN -> MIN >> 1 -> clip -128, MIN -> -128, 150, -150 -> -128, 12
    assert requant_reference(t, 1, -128, 127).tolist() == [3, -2, -3, 3, -3, -128, -128, 127, -128, 12]
    assert requant_reference(t, 0, -128, 127).tolist() == [5, -5, -6, 6, -7, 127, -128, 127, -128, 24]
    assert requant_reference(t, 2, 0, 6).tolist() == [1, 0, 0, 2, 0, 0, 0, 6, 0, 6]
    # clip bounds beyond int8: the cast keeps the low 8 bits, as a C cast (and the kernel) does
    assert requant_reference(t[7:9], 0, -300, 300).tolist() == [300 - 256, -300 + 256]


# -- QGemm ----------------------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(SIZES, st.sampled_from([1, 2, 3, 5, 16, 17, 64, 100]), SIZES, CLIPS, st.integers(0, 2**16))
def test_qgemm_generated_shapes(m, k, n, clip, seed):
    shift = int(np.ceil(np.log2(5500 * np.sqrt(k) * 2**11 / 64)))  # outputs mostly in range
    op = QGemm((m, k), (n, k), shift, *clip)
    assert_exact(op, op.random_inputs(seed))


GEMMS = [QGemm((1, 512), (1000, 512), 24), QGemm((7, 33), (10, 33), 21)]


@pytest.mark.parametrize("op", GEMMS, ids=["resnet18 fc", "odd"])
def test_qgemm_classes_with_realistic_and_wrapping_vectors(op, capfd):
    out = assert_exact(op, op.random_inputs(0))
    assert len(np.unique(out)) > min(64, out.size // 2)  # mostly in range, not all clipped
    for seed in range(3):
        data, weight, _, _ = op.random_inputs(seed)
        n = op.weight_shape[0]
        assert_exact(op, [data, weight, full_range_int32(seed, n), full_range_int32(seed + 1, n)])
    assert "not vectorized" not in capfd.readouterr().err


def test_qgemm_accumulation_wraps_at_32_bits():
    k = 140_000  # 140000 * 16384 = 2.29e9 wraps to -2.0e9
    op = QGemm((1, k), (2, k), 0)
    data, weight = np.full((1, k), -128, np.int8), np.full((2, k), -128, np.int8)
    weight[1, ::2] = 127
    got = assert_exact(op, [data, weight, np.zeros(2, np.int32), np.ones(2, np.int32)])
    assert got.tolist() == [[-128, 127]]


def test_qgemm_bias_and_multiplier_wrap():
    op = QGemm((1, 1), (4, 1), 3)
    data, weight = np.ones((1, 1), np.int8), np.array([[1], [1], [2], [-3]], np.int8)
    bias = np.array([INT32.max, -13, 2**30 - 1, 0], np.int32)
    mult = np.array([1, 1, 2, INT32.min], np.int32)
    # t: MAX + 1 -> MIN; -12; (2**30 + 1) * 2 = 2**31 + 2 -> MIN + 2; -3 * MIN -> MIN
    # (t + 4) >> 3: -128, -1 (-1.5 rounds half up to -1), -128, -128
    got = assert_exact(op, [data, weight, bias, mult])
    assert got.tolist() == [[-128, -1, -128, -128]]


# -- QGemm, precise requantization ----------------------------------------------------------------

PRECISE_MODES = ("typical", "near 2**31")


def precise_inputs(
    inputs: list[np.ndarray], taps: int, clip: tuple[int, int], mode: str, seed: int
) -> tuple[list[np.ndarray], PreciseRequant]:
    """Plain seeded inputs (data, weight, bias, mult) made precise: multipliers, shift, split and
    clamp bounds from precise_requant (as a QDQ import makes them) for seeded per-channel ratios
    within a factor 4 of a centre.  "typical": ratios that map a sum of `taps` full-range
    products mostly into int8, the tails clamped; "near 2**31": ratios up to 0.9999
    (multipliers up to 2**31 - 1) on data, weights and biases shrunk so that t spreads around
    the clamp bounds."""
    data, weight, bias, _ = inputs
    if mode == "near 2**31":
        data, weight, bias, centre = data >> 4, weight >> 4, bias >> 10, 0.7
    else:
        centre = 48 / (5500 * np.sqrt(taps))  # 5500: the std of a product of two int8s
    reals = np.minimum(centre * 2.0 ** np.random.default_rng(seed).uniform(-2, 2, bias.size), 0.9999)
    p = precise_requant(reals, clip, "test")
    return [data, weight, bias, p.mult, p.clamp_lo, p.clamp_hi], p


def precise_attrs(p: PreciseRequant, clip: tuple[int, int]) -> dict[str, object]:
    return {"shift": p.shift, "split": p.split, "clip_lo": clip[0], "clip_hi": clip[1]}


def graph_output(op: str, inputs: list[np.ndarray], attrs: dict[str, object]) -> np.ndarray:
    """compiler.graph.interp's result of one `op` node (QConv, QGemm) on data inputs[0] and
    constants inputs[1:] (weight, bias, mult[, clamp_lo, clamp_hi]); building the node checks
    its parameters as the contract does (precise_checks)."""
    g = Graph()
    g.add_input("x", inputs[0].shape, inputs[0].dtype.name)
    names = ["w", "b", "m", "lo", "hi"][: len(inputs) - 1]
    for name, array in zip(names, inputs[1:], strict=True):
        g.add_value(const(name, array))
    node = append(g, op, ["x", *names], ["y"], attrs)
    g.outputs = ["y"]
    verify(g)
    (y,) = evaluate_node(g, node, inputs)
    return y


def assert_clamps_and_clips(t: np.ndarray, inputs: list[np.ndarray], out: np.ndarray, clip: tuple[int, int],
                            axis: int) -> None:
    """Some t = acc + bias below clamp_lo and some above clamp_hi, and outputs at both clip bounds."""
    shape = [1] * t.ndim
    shape[axis] = -1
    lo_t, hi_t = (v.astype(np.int64).reshape(shape) for v in inputs[4:6])
    assert (t < lo_t).any() and (t > hi_t).any() and ((t > lo_t) & (t < hi_t)).any()
    assert {clip[0], clip[1]} <= set(np.unique(out).tolist())


@settings(max_examples=10, deadline=None)
@given(SIZES, st.sampled_from([1, 2, 3, 16, 17, 64, 100]), SIZES, CLIPS, st.sampled_from(PRECISE_MODES),
       st.integers(0, 2**16))
def test_precise_qgemm_generated_shapes_equal_the_graph(m, k, n, clip, mode, seed):
    inputs, p = precise_inputs(QGemm((m, k), (n, k)).random_inputs(seed), k, clip, mode, seed)
    op = QGemm((m, k), (n, k), p.shift, *clip, precise=True)
    assert np.array_equal(assert_exact(op, inputs), graph_output("QGemm", inputs, precise_attrs(p, clip)))


@pytest.mark.parametrize("mode", PRECISE_MODES)
@pytest.mark.parametrize("clip", [(-128, 127), (0, 127)], ids=["int8", "relu"])
def test_precise_qgemm_resnet18_fc_clamps_and_clips(mode, clip, capfd):
    plain = QGemm((2, 512), (1000, 512))
    inputs, p = precise_inputs(plain.random_inputs(7), 512, clip, mode, 7)
    op = dataclasses.replace(plain, shift=p.shift, clip_lo=clip[0], clip_hi=clip[1], precise=True)
    out = assert_exact(op, inputs)
    assert np.array_equal(out, graph_output("QGemm", inputs, precise_attrs(p, clip)))
    assert_clamps_and_clips(wrap32(gemm_acc(*inputs[:2]) + inputs[2]), inputs, out, clip, axis=1)
    if mode == "near 2**31":
        assert p.mult.max() > 2**31 - 2**20
    assert "not vectorized" not in capfd.readouterr().err


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 31), CLIPS, st.integers(0, 2**16))
def test_precise_qgemm_is_exact_for_any_int32_vectors(shift, clip, seed):
    """Full-range multipliers of both signs and clamp bounds, loose or tight, beyond what the
    contract allows: the int64 product is exact for all, and the clip acts where the clamp does not."""
    op = QGemm((3, 17), (64, 17), shift, *clip, precise=True)
    data, weight, bias, _, _, _ = op.random_inputs(seed)
    mult, *clamps = (full_range_int32(seed + i, 64) for i in range(3))
    lo_t, hi_t = np.minimum(*clamps), np.maximum(*clamps)
    inputs = [data, weight, bias, mult, lo_t, hi_t]
    want = precise_requantize(gemm_acc(data, weight), bias, mult, lo_t, hi_t, shift, *clip)
    assert np.array_equal(assert_exact(op, inputs), want)


def test_precise_qgemm_by_hand():
    """acc = 1, t = bias + 1; shift 31: the product needs 62 bits, and 0.5 rounds half up."""
    op = QGemm((1, 1), (7, 1), 31, precise=True)
    t = np.array([100, -100, 1, -1, 3, 500, -500])
    mult = np.array([INT32.max, INT32.max, 2**30, 2**30, 2**30, INT32.max, INT32.max], np.int32)
    lo_t = np.array([-200, -200, -5, -5, -5, -130, -129], np.int32)
    hi_t = np.array([200, 200, 5, 5, 5, 130, 129], np.int32)
    # (t * (2**31 - 1) + 2**30) >> 31 = t for |t| < 2**29: 100, -100; t / 2 rounds half up:
    # 0.5 -> 1, -0.5 -> 0, 1.5 -> 2; 500 clamps to 130, clipped to 127; -500 to -129, -128
    inputs = [np.ones((1, 1), np.int8), np.ones((7, 1), np.int8), (t - 1).astype(np.int32), mult, lo_t, hi_t]
    assert assert_exact(op, inputs).tolist() == [[100, -100, 1, 0, 2, 127, -128]]


# -- QAdd -----------------------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(st.lists(SIZES, min_size=1, max_size=4).map(tuple), st.integers(-(2**15), 2**15),
       st.integers(-(2**15), 2**15), CLIPS, st.integers(0, 2**16))
def test_qadd_generated_shapes(shape, mult_a, mult_b, clip, seed):
    op = QAdd(shape, mult_a, mult_b, 9, *clip)
    assert_exact(op, op.random_inputs(seed))


def test_qadd_residual_class_and_full_range_multipliers(capfd):
    op = QAdd((1, 64, 56, 56), 300, -170, 8)
    assert len(np.unique(assert_exact(op, op.random_inputs(0)))) > 64
    for seed in range(3):  # 128 * 2**31 wraps, and so does the sum of two products
        rng = np.random.default_rng(seed)
        mult_a, mult_b = (int(v) for v in rng.integers(INT32.min, INT32.max, 2, endpoint=True))
        wide = QAdd((3, 50), mult_a, mult_b, int(rng.integers(0, 32)))
        assert_exact(wide, wide.random_inputs(seed))
    assert "not vectorized" not in capfd.readouterr().err


def test_qadd_by_hand():
    op = QAdd((6,), 3, -2, 2)
    a = np.array([1, -1, 2, 127, -128, 0], np.int8)
    b = np.array([0, 0, 1, -128, 127, 1], np.int8)
    # t = 3a - 2b: 3 -3 4 637 -638 -2; (t + 2) >> 2: 1 (0.75 -> 1), -1 (-0.75 -> -1), 1, 127
    # (159 clipped), -128 (-159 clipped), 0 (-0.5 rounds half up to 0)
    assert assert_exact(op, [a, b]).tolist() == [1, -1, 1, 127, -128, 0]
    wrap = QAdd((2,), INT32.max, INT32.max, 0)  # 2 * MAX wraps to -2; MAX * -1 + MAX * 1 = 0
    got = assert_exact(wrap, [np.array([2, -1], np.int8), np.array([0, 1], np.int8)])
    assert got.tolist() == [-2, 0]


# -- QGlobalAvgPool -------------------------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(st.tuples(st.integers(1, 2), SIZES, SIZES, SIZES), st.integers(1, 2**15), CLIPS, st.integers(0, 2**16))
def test_qglobal_avg_pool_generated_shapes(shape, mult, clip, seed):
    op = QGlobalAvgPool(shape, mult, 12, *clip)
    assert_exact(op, op.random_inputs(seed))


def test_qglobal_avg_pool_resnet18_class_and_wrapping(capfd):
    op = QGlobalAvgPool((1, 512, 7, 7), 1337, 16)  # about 1/49 with shift 16
    data = np.random.default_rng(0).integers(-128, 128, op.shape).astype(np.int8)
    out = assert_exact(op, [data])
    assert np.abs(out.astype(int) - np.rint(data.mean(axis=(2, 3), keepdims=True))).max() <= 1
    big = QGlobalAvgPool((1, 2, 128, 128), INT32.max, 3)  # sum * MAX wraps
    assert_exact(big, big.random_inputs(1))
    assert "not vectorized" not in capfd.readouterr().err


def test_qglobal_avg_pool_product_wraps_at_32_bits():
    op = QGlobalAvgPool((1, 1, 1024, 1024), 2**11, 0)  # sum -2**27, * 2**11 = -2**38 wraps to 0
    got = assert_exact(op, [np.full(op.shape, -128, np.int8)])
    assert got.tolist() == [[[[0]]]]


# -- against the graph's evaluators and errors ------------------------------------------------------


@pytest.mark.parametrize("op,graph_op,attrs", [
    (GEMMS[1], "QGemm", {}),
    (QAdd((1, 64, 56, 56), 300, -170, 8), "QAdd", {"mult_a": 300, "mult_b": -170}),
    (QGlobalAvgPool((1, 512, 7, 7), 1337, 16), "QGlobalAvgPool", {"mult": 1337}),
], ids=["QGemm", "QAdd", "QGlobalAvgPool"])
def test_equals_the_graph_evaluator(op, graph_op, attrs):
    full = make_attrs(graph_op, {**attrs, "shift": op.shift, "clip_lo": op.clip_lo, "clip_hi": op.clip_hi})
    for seed in range(2):
        inputs = op.random_inputs(seed + 10)
        (expected,) = OPS[graph_op].evaluate(inputs, full)
        assert np.array_equal(kernel_of(op)(*inputs), expected)


@pytest.mark.parametrize("name,params,message", [
    ("qgemm", dict(shape=(2, 3), weight_shape=(4, 5)), r"weight \(4, 5\) does not take inputs of 3 features"),
    ("qgemm", dict(shape=(2, 3, 1), weight_shape=(4, 3)), "shape must have 2 dimensions"),
    ("qgemm", dict(shape=(2, 3), weight_shape=(4, 3), shift=-1), r"shift must be an int in \[0, 31\], not"),
    ("qgemm", dict(shape=(2, 3), weight_shape=(4, 3), precise=1), "precise must be a bool, not 1"),
    ("qgemm", dict(shape=(2, 3), weight_shape=(4, 3), precise=True),
     r"precise requantization needs shift >= 1 \(it rounds by 2\*\*\(shift - 1\)\), not 0"),
    ("qadd", dict(shape=(4,), mult_a=2**31, mult_b=1), r"mult_a must be an int in \[-2147483648, 2147483647"),
    ("qadd", dict(shape=(4,), mult_a=1, mult_b=1, clip_lo=3, clip_hi=2), "clip_lo 3 is above clip_hi 2"),
    ("qadd", dict(shape=(4,), mult_a=1), "missing 1 required positional argument: 'mult_b'"),
    ("qglobal_avg_pool", dict(shape=(1, 2, 3), mult=1), "shape must have 4 dimensions"),
    ("qglobal_avg_pool", dict(shape=(1, 2, 3, 3), mult=1.5), r"mult must be an int in"),
])
def test_bad_parameters(name, params, message):
    with pytest.raises(ValueError, match=message):
        compile_host_op(name, **params)


def test_numpy_integers_are_accepted_and_normalised():
    op = QAdd((np.int64(4),), np.int32(3), np.int64(-2), np.int8(1), np.int16(-5), np.int64(5))
    assert op == QAdd((4,), 3, -2, 1, -5, 5)
    assert all(type(v) is int for v in (op.mult_a, op.mult_b, op.shift, op.clip_lo, op.clip_hi))
