"""The float32 extension of the TE language: construction checks, reductions, evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler import te
from compiler.errors import TensorExprError
from compiler.te import expr as E

X = E.Var("x")


def f32(v: float) -> float:
    return float(np.float32(v))


def test_literals_take_the_float_dtype():
    a = te.placeholder((4,), "float32", "a")
    e = a[0] + 1
    assert isinstance(e, E.Bin) and e.b == E.FloatConst(1.0) and e.dtype == "float32"
    assert (2 * a[0]).a == E.FloatConst(2.0)
    assert te.const(3, "float32") == E.FloatConst(3.0)
    assert str(a[1] * 0.5) == "(a[1] * 0.5)"


def test_mixing_ints_and_floats_needs_a_cast():
    a = te.placeholder((4,), "float32", "a")
    i = te.placeholder((4,), "int32", "i")
    with pytest.raises(TensorExprError, match="different dtypes int32 and float32"):
        i[0] + 0.5
    with pytest.raises(TensorExprError, match="different dtypes float32 and int32"):
        a[0] + i[0]
    assert (a[0] + te.cast("float32", i[0])).dtype == "float32"


def test_operators_by_dtype():
    a = te.placeholder((4,), "float32", "a")
    i = te.placeholder((4,), "int32", "i")
    assert (a[0] / a[1]).dtype == "float32"
    with pytest.raises(TensorExprError, match="'/' divides floats, not int32; use // for integers"):
        i[0] / 2
    for op in ("//", "%", ">>", "<<"):
        with pytest.raises(TensorExprError, match=f"'{op}' needs integer operands, not float32"):
            E.binary(op, a[0], a[1])
    assert te.lt(a[0], 1.5).dtype == "bool"


def test_math_calls_check_their_operands():
    a = te.placeholder((4,), "float32", "a")
    assert str(te.exp(a[0] - 1)) == "exp((a[0] - 1.0))"
    with pytest.raises(TensorExprError, match="exp needs a float operand, not int32 x; cast it"):
        te.exp(X)
    with pytest.raises(TensorExprError, match="unknown math function 'cos'"):
        te.call("cos", a[0])
    with pytest.raises(TensorExprError, match="cannot cast float32 to bool; compare it instead"):
        te.cast("bool", a[0])


def test_reductions_and_their_identities():
    a = te.placeholder((4, 5), "float32", "a")
    q = te.placeholder((4, 5), "uint8", "q")
    k = te.reduce_axis(5, "k")
    top = te.compute((4,), lambda i: te.max_reduce(a[i, k], k), "top")
    assert isinstance(top.op.body, E.Reduce) and top.op.body.op == "max"
    assert str(top.op.body) == "max(a[i, k], axis=[k])"
    assert top.op.body.identity == E.FloatConst(-math.inf)
    low = te.compute((4,), lambda i: te.min_reduce(q[i, k], k), "low")
    assert low.op.body.identity == E.Const(255, "uint8")
    assert te.max_reduce(E.cast("int8", X), k).identity == E.Const(-128, "int8")
    assert te.sum(a[0, k], k).identity == E.FloatConst(0.0)
    with pytest.raises(TensorExprError, match="unknown reduction 'prod'"):
        te.reduce("prod", a[0, k], k)
    with pytest.raises(TensorExprError, match="max needs one or more axes made by reduce_axis"):
        te.max_reduce(a[0, 0], [])
    with pytest.raises(TensorExprError, match="sum of a condition"):
        te.sum(te.lt(a[0, k], 0.0), k)


def test_compute_takes_star_index_functions():
    a = te.placeholder((2, 3, 4), "float32", "a")
    b = te.compute(a.shape, lambda *i: a[i] * 2.0, "b")
    assert [ax.name for ax in b.op.axes] == ["i0", "i1", "i2"]
    assert str(b.op.body) == "(a[i0, i1, i2] * 2.0)"


def test_evaluate_rounds_every_float_operation_to_float32():
    one_tenth, two_tenths = E.FloatConst(0.1), E.FloatConst(0.2)
    assert E.evaluate(one_tenth + two_tenths, {}) == f32(np.float32(0.1) + np.float32(0.2))
    assert E.evaluate(E.FloatConst(1.0) / E.FloatConst(3.0), {}) == f32(np.float32(1) / np.float32(3))
    assert E.evaluate(E.FloatConst(3e38) * 10.0, {}) == math.inf
    nan = E.evaluate(E.maximum(E.FloatConst(math.nan), 1.0), {})
    assert math.isnan(nan)  # NaN propagates as in numpy.maximum
    assert E.evaluate(te.lt(E.FloatConst(math.nan), 1.0), {}) == 0
    assert E.evaluate(E.binary("!=", E.FloatConst(math.nan), E.FloatConst(math.nan)), {}) == 1
    assert math.copysign(1.0, E.evaluate(-E.FloatConst(0.0), {})) == -1.0


@pytest.mark.parametrize(
    "value,dtype,expected",
    [(2.9, "int8", 2), (-2.9, "int8", -2), (300.7, "int8", 127), (-1e10, "int8", -128),
     (math.nan, "int32", 0), (math.inf, "int32", 2**31 - 1), (-5.0, "uint8", 0), (255.9, "uint8", 255),
     (1e30, "int64", 2**63 - 1)],
)
def test_float_to_int_casts_truncate_and_saturate(value, dtype, expected):
    assert E.evaluate(te.cast(dtype, E.FloatConst(value)), {}) == expected


def test_int_to_float_casts_round_to_nearest_even():
    assert E.evaluate(te.cast("float32", X), {X: 2**24 + 1}) == 2.0**24
    assert E.evaluate(te.cast("float32", X), {X: 2**24 + 3}) == 2.0**24 + 4
    assert E.evaluate(te.cast("float32", X), {X: -7}) == -7.0


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "erf", "tanh", "fabs", "floor", "rint"])
def test_evaluate_math_calls(name):
    ref = {"exp": math.exp, "log": math.log, "sqrt": math.sqrt, "rsqrt": lambda v: 1 / math.sqrt(v),
           "erf": math.erf, "tanh": math.tanh, "fabs": abs, "floor": math.floor,
           "rint": lambda v: float(np.rint(v))}[name]
    for v in (0.5, 2.5, 3.5, 7.25):
        assert E.evaluate(te.call(name, E.FloatConst(v)), {}) == f32(ref(v))


def test_rint_rounds_half_to_even():
    got = [E.evaluate(te.rint(E.FloatConst(v)), {}) for v in (0.5, 1.5, 2.5, -0.5, -1.5, 2.4999998)]
    assert got == [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]


def test_integer_semantics_are_unchanged():
    assert E.evaluate(E.cast("int8", X) + 100, {X: 100}) == -56  # int8 wraps
    assert E.evaluate(E.cast("uint8", X) * 2, {X: 200}) == 144
    assert E.evaluate(X >> 40, {X: -5}) == -1
    assert E.evaluate(X // 4, {X: -7}) == -2 and E.evaluate(X % 4, {X: -7}) == 1
