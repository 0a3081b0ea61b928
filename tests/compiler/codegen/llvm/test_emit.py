"""Host code generation semantics: what the native code computes, against Python integers,
numpy and the math module (written here, independently of compiler.te.scalar)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from compiler import te
from compiler.codegen.cpu import HostKernel, compile_func
from compiler.errors import TensorExprError
from compiler.lower.cpu import lower_host
from compiler.schedule import Schedule
from compiler.te import expr as E

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _elementwise(dtypes: list[str], n: int, fn: Callable[..., E.Expr], out_dtype: str | None = None,
                 vectorize: bool = False) -> HostKernel:
    """A kernel out[i] = fn(in0[i], in1[i], ...) over n elements."""
    ins = [te.placeholder((n,), d, f"in{k}") for k, d in enumerate(dtypes)]
    out = te.compute((n,), lambda i: fn(*(t[i] for t in ins)), "out", out_dtype)
    s = Schedule(out)
    if vectorize:
        s.vectorize("out", "i")
    return compile_func(lower_host(s, "k", ins))


def test_integer_division_floors_like_python_and_never_traps():
    a = np.array([7, -7, 7, -7, 0, 5, I32_MIN, I32_MIN, 13, -13, 9], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, -1, 1, 0, 0, -1], dtype=np.int32)
    div = _elementwise(["int32", "int32"], a.size, lambda x, y: x // y)(a, b)
    mod = _elementwise(["int32", "int32"], a.size, lambda x, y: x % y)(a, b)
    for k, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        if y == 0:  # documented: the dividend for //, 0 for %
            assert (div[k], mod[k]) == (x, 0)
        else:
            assert (div[k], mod[k]) == (_wrap32(x // y), x % y), (x, y)


@pytest.mark.parametrize("divisor", [7, -3, -1, 1, 16])
def test_division_by_constants(divisor):
    a = np.arange(-50, 50, dtype=np.int32)
    a[0] = I32_MIN
    div = _elementwise(["int32"], a.size, lambda x: x // divisor)(a)
    mod = _elementwise(["int32"], a.size, lambda x: x % divisor)(a)
    assert div.tolist() == [_wrap32(int(x) // divisor) for x in a]
    assert mod.tolist() == [int(x) % divisor for x in a]
    x = te.placeholder((4,), "int32", "x")
    with pytest.raises(TensorExprError, match="division by the constant zero"):
        compile_func(lower_host(Schedule(te.compute((4,), lambda i: x[i] // 0, "out"))))


def test_shifts_mean_what_python_means_for_every_count():
    a = np.array([-1000, 1000, 12345, -5, I32_MIN, I32_MAX] * 14, dtype=np.int32)
    n = np.repeat(np.arange(-40, 44, 6, dtype=np.int32), 6)
    right = _elementwise(["int32", "int32"], a.size, lambda x, y: x >> y)(a, n)
    pairs = list(zip(a.tolist(), n.tolist(), strict=True))
    assert right.tolist() == [_wrap32(x >> y if y >= 0 else x << -y) for x, y in pairs]
    counts = np.abs(n)
    left = _elementwise(["int32", "int32"], a.size, lambda x, y: x << y)(a, counts)
    assert left.tolist() == [_wrap32(x << y) for x, y in zip(a.tolist(), counts.tolist(), strict=True)]
    u = np.array([255, 128, 7, 200], dtype=np.uint8)
    assert _elementwise(["uint8"], 4, lambda x: x >> 1)(u).tolist() == [127, 64, 3, 100]


def test_narrow_integers_wrap_and_compare_by_signedness():
    a = np.array([100, -128, 127, -1], dtype=np.int8)
    assert _elementwise(["int8"], 4, lambda x: x + 100)(a).tolist() == [-56, -28, -29, 99]
    u = np.array([200, 3, 255, 0], dtype=np.uint8)
    assert _elementwise(["uint8"], 4, lambda x: E.maximum(x, 100))(u).tolist() == [200, 100, 255, 100]
    assert _elementwise(["uint8"], 4, lambda x: x // 3)(u).tolist() == [66, 1, 85, 0]
    widened = _elementwise(["uint8"], 4, lambda x: te.cast("int32", x) - 1)(u)
    assert widened.dtype == np.int32 and widened.tolist() == [199, 2, 254, -1]
    narrowed = _elementwise(["int32"], 3, lambda x: te.cast("int8", x))(np.array([300, -129, 5], np.int32))
    assert narrowed.tolist() == [44, 127, 5]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_float_to_int_casts_truncate_and_saturate(dtype):
    info = np.iinfo(dtype)
    x = np.array([2.9, -2.9, 0.5, -0.5, 1e20, -1e20, np.inf, -np.inf, np.nan, 100.99, -128.5, 255.5],
                 dtype=np.float32)
    got = _elementwise(["float32"], x.size, lambda v: te.cast(dtype, v))(x)
    expected = [0 if math.isnan(v) else int(min(max(v, info.min), info.max)) if math.isinf(v)
                else min(max(math.trunc(v), info.min), info.max) for v in x.tolist()]
    assert got.dtype == np.dtype(dtype) and got.tolist() == expected


def test_int_to_float_casts_round_to_nearest_even():
    a = np.array([2**24 + 1, 2**24 + 3, -7, I32_MAX, I32_MIN], dtype=np.int32)
    got = _elementwise(["int32"], 5, lambda v: te.cast("float32", v))(a)
    assert np.array_equal(got, a.astype(np.float32))
    u = np.array([255, 0], dtype=np.uint8)
    assert _elementwise(["uint8"], 2, lambda v: te.cast("float32", v))(u).tolist() == [255.0, 0.0]


def test_float_arithmetic_is_ieee_and_min_max_propagate_nan():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1000)).astype(np.float32) * 100
    b[:4] = [0.0, np.nan, -0.0, np.inf]
    expr = _elementwise(["float32", "float32"], a.size, lambda x, y: (x * y + x) / (y - 3.0))(a, b)
    with np.errstate(all="ignore"):
        assert np.array_equal(expr, (a * b + a) / (b - np.float32(3)), equal_nan=True)
    for op, ref in ((E.maximum, np.maximum), (E.minimum, np.minimum)):
        got = _elementwise(["float32", "float32"], a.size, op)(a, b)
        assert np.array_equal(got, ref(a, b), equal_nan=True)


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float32 spacing at the exact value."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


@pytest.mark.parametrize(
    "name,ref,low,high,max_ulps",
    [("exp", math.exp, -87.0, 88.0, 2.0), ("exp", math.exp, -103.0, -87.5, 2.0),
     ("log", math.log, 1e-30, 1e30, 2.0), ("sqrt", math.sqrt, 0.0, 1e30, 0.5),
     ("rsqrt", lambda v: 1 / math.sqrt(v), 1e-30, 1e30, 2.0), ("tanh", math.tanh, -10.0, 10.0, 3.0),
     ("erf", math.erf, -0.5, 0.5, 4.0)],
)
def test_math_calls_are_within_a_few_ulps(name, ref, low, high, max_ulps):
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(low, high, 20000)).astype(np.float32)
    if name in ("log", "rsqrt", "sqrt") and low >= 0:
        x = np.exp(rng.uniform(math.log(max(low, 1e-30)), math.log(high), 20000)).astype(np.float32)
    got = _elementwise(["float32"], x.size, lambda v: te.call(name, v), vectorize=True)(x)
    exact = np.array([ref(float(v)) for v in x])
    assert _ulps(got, exact).max() <= max_ulps


def test_erf_absolute_error_and_special_values():
    x = np.concatenate([np.linspace(-6, 6, 20001), [np.inf, -np.inf, np.nan, -0.0, 0.0]]).astype(np.float32)
    got = _elementwise(["float32"], x.size, te.erf)(x)
    finite = np.isfinite(x)
    exact = np.array([math.erf(float(v)) for v in x[finite]])
    assert np.abs(got[finite] - exact).max() <= 2.5e-7
    assert got[-5:-3].tolist() == [1.0, -1.0] and math.isnan(got[-3])
    assert math.copysign(1, got[-2]) == -1 and got[-1] == 0.0


def test_exp_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 88.72, 88.73, -103.0, -104.0, -1e30], dtype=np.float32)
    got = _elementwise(["float32"], x.size, te.exp)(x)
    assert got[0] == np.inf and got[1] == 0.0 and math.isnan(got[2]) and got[3] == 1.0
    assert np.isfinite(got[4]) and got[5] == np.inf  # exp(88.73) > FLT_MAX
    assert 0 < got[6] < 1.2e-38 and got[7] == 0.0 and got[8] == 0.0  # subnormal, then zero


def test_rounding_calls_are_exact():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999998, -7.75, 1e10, -3.0], dtype=np.float32)
    assert np.array_equal(_elementwise(["float32"], x.size, te.rint)(x), np.rint(x))
    assert np.array_equal(_elementwise(["float32"], x.size, te.floor)(x), np.floor(x))
    assert np.array_equal(_elementwise(["float32"], x.size, te.fabs)(x), np.abs(x))


def test_a_load_under_a_false_condition_never_runs():
    """The other branch reads 400 MB before the array: it would fault if it were executed."""
    x = te.placeholder((1,), "float32", "x")
    out = te.compute((2,), lambda i: te.if_then_else(te.ge(i, 1), x[(i - 1) * 100_000_000], -1.0), "out")
    kernel = compile_func(lower_host(Schedule(out)))
    assert kernel(np.array([5.0], np.float32)).tolist() == [-1.0, 5.0]


def test_vectorize_lets_llvm_vectorise_a_float_sum():
    x = te.placeholder((64, 256), "float32", "x")
    k = te.reduce_axis(256, "k")
    total = te.compute((64,), lambda i: te.sum(x[i, k], k), "total")
    serial = compile_func(lower_host(Schedule(total), "serial"))
    s = Schedule(total)
    s.vectorize("total", "k")
    vector = compile_func(lower_host(s, "vector"))
    assert " x float>" not in serial.optimized_ir  # IEEE order forbids reassociation
    assert " x float>" in vector.optimized_ir
    data = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    exact = data.astype(np.float64).sum(axis=1)
    for kernel in (serial, vector):
        assert np.allclose(kernel(data), exact, rtol=0, atol=1e-4)


def test_bool_tensors_are_not_kernel_arguments():
    m = te.placeholder((4,), "bool", "m")
    out = te.compute((4,), lambda i: te.cast("int32", m[i]), "out")
    with pytest.raises(TensorExprError, match="tensor m is bool; host kernels take numeric tensors only"):
        compile_func(lower_host(Schedule(out)))
