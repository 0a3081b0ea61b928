"""Sub and div with numpy broadcasting (float32 bit for bit, integers exactly, integer division
truncating toward zero as ONNX Div) and tanh (within 1 float32 ulp of the correctly rounded
value, measured over 2**20 points; the test allows 2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.opdefs import OPS, make_attrs
from compiler.ops.cpu import Div, HardSigmoid, HardSwish, Sub, Tanh
from tests.compiler.ops.cpu.util import SIZES, assert_exact, run

NUMERIC = st.sampled_from(["float32", "int8", "uint8", "int16", "int32", "int64"])


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    out = draw(st.lists(SIZES, min_size=1, max_size=3))

    def operand() -> tuple[int, ...]:
        rank = draw(st.integers(0, len(out)))
        return tuple(d if draw(st.booleans()) else 1 for d in out[len(out) - rank :]) or (1,)

    return operand(), operand()


def _evaluate(op: str, inputs: list[np.ndarray]) -> np.ndarray:
    (out,) = OPS[op].evaluate(inputs, make_attrs(op, {}))
    return out  # type: ignore[no-any-return]


@settings(max_examples=10, deadline=None, derandomize=True)
@given(broadcast_pair(), NUMERIC, st.integers(0, 99))
def test_sub(shapes, dtype, seed):
    op = Sub(*shapes, dtype)
    inputs = op.random_inputs(seed)
    got, ref = run(op, inputs=inputs)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, ref)
    with np.errstate(over="ignore"):
        assert np.array_equal(got, _evaluate("Sub", inputs))


@settings(max_examples=10, deadline=None, derandomize=True)
@given(broadcast_pair(), NUMERIC, st.integers(0, 99))
def test_div(shapes, dtype, seed):
    op = Div(*shapes, dtype)
    a, b = op.random_inputs(seed)
    if dtype != "float32":
        b.flat[0] = 0  # a zero divisor gives 0, as numpy's
    got, ref = run(op, inputs=[a, b])
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, ref, equal_nan=dtype == "float32")
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        assert np.array_equal(got, _evaluate("Div", [a, b]), equal_nan=dtype == "float32")


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -6, 0, -128, -128, 127, 5], np.int8)
    b = np.array([2, 2, -2, -2, 3, -3, 5, -1, 1, 0, 0], np.int8)
    got, _ = run(Div((11,), (11,), "int8"), inputs=[a, b])
    assert got.tolist() == [3, -3, -3, 3, 2, 2, 0, -128, -128, 0, 0]  # MIN / -1 wraps
    assert_exact(Div((3, 5), (5,), "int64"), seed=4)


def test_float_div_and_sub_are_ieee():
    a = np.array([1.0, -1.0, 0.0, np.inf, 1e-38, 3.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, np.inf, 1e10, 7.0], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = a / b
    got, _ = run(Div((6,), (6,)), inputs=[a, b])
    assert np.array_equal(got, want, equal_nan=True)
    got, _ = run(Sub((1,), (6,)), inputs=[np.array([1.0], np.float32), b])
    assert np.array_equal(got, np.float32(1.0) - b)


def test_bert_tiny_scaling_and_mask():
    assert_exact(Div((1, 2, 128, 128), (1,)), seed=1)
    assert_exact(Sub((1,), (1, 1, 1, 128)), seed=2)


def ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Distance in float32 steps (the ordered integer view of the bits)."""

    def ordered(x: np.ndarray) -> np.ndarray:
        bits = x.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    return np.abs(ordered(got) - ordered(ref))


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.lists(SIZES, min_size=1, max_size=3), st.integers(0, 99))
def test_tanh(shape, seed):
    op = Tanh(tuple(shape))
    x = (op.random_inputs(seed)[0] * 3).astype(np.float32)
    got, ref = run(op, inputs=[x])
    assert ulps(got, ref).max() <= 2
    assert np.allclose(got, _evaluate("Tanh", [x]), rtol=3e-7, atol=0)


def test_tanh_over_its_range_and_edges():
    x = np.concatenate([np.linspace(-12, 12, 1 << 16), np.geomspace(1e-30, 0.7, 4096)]).astype(np.float32)
    op = Tanh(x.shape)
    got, ref = run(op, inputs=[x])
    assert ulps(got, ref).max() <= 2
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 0.625, -0.625, 44.0, -3e38], np.float32)
    got, _ = run(Tanh(edges.shape), inputs=[edges])
    assert got[0] == 0 and not np.signbit(got[0]) and got[1] == 0 and np.signbit(got[1])
    assert got[2:4].tolist() == [1.0, -1.0] and np.isnan(got[4]) and got[5] == np.float32(1e-40)
    assert ulps(got[6:], np.tanh(edges[6:].astype(np.float64)).astype(np.float32)).max() <= 1


@pytest.mark.parametrize("op,onnx_op,attrs", [
    (HardSigmoid((4099,)), "HardSigmoid", {}),
    (HardSigmoid((4099,), alpha=0.25, beta=0.4), "HardSigmoid", {"alpha": 0.25, "beta": 0.4}),
    (HardSwish((4099,)), "HardSwish", {}),
])
def test_hard_activations_bit_exact(op, onnx_op, attrs):
    """Over [-8, 8] (both kinks and saturation) and the edges, the numpy evaluator's float32."""
    x = np.concatenate([np.linspace(-8, 8, 4091), [0.0, -0.0, 3.0, -3.0, 2.5, -2.5, 1e-30, -1e-30]])
    x = x.astype(np.float32)
    got, _ = run(op, inputs=[x])
    (want,) = OPS[onnx_op].evaluate([x], make_attrs(onnx_op, attrs))
    np.testing.assert_array_equal(got, want)
    assert "x float>" in op.build().optimized_ir  # vectorised


def test_hard_sigmoid_needs_finite_parameters():
    with pytest.raises(ValueError, match="hard_sigmoid: alpha inf is not finite"):
        HardSigmoid((4,), alpha=float("inf"))


def test_tanh_is_vectorised():
    kernel = Tanh((4, 64)).build()
    assert "x float>" in kernel.optimized_ir and "tanhf" not in kernel.optimized_ir


@pytest.mark.parametrize("cls", [Sub, Div])
def test_bad_operands(cls):
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4,\) do not broadcast"):
        cls((2, 3), (4,))
    with pytest.raises(ValueError, match="operand dtype must be one of"):
        cls((2,), (2,), "float64")
