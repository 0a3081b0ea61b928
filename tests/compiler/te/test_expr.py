"""Tensor expressions: construction checks, affine analysis, evaluation."""

from __future__ import annotations

import pytest

from compiler import te
from compiler.errors import TensorExprError
from compiler.te import expr as E


def test_index_count_is_checked():
    a = te.placeholder((4, 4), "int8", "a")
    with pytest.raises(TensorExprError, match=r"a has 2 dimensions \(4, 4\), indexed with 1"):
        a[0]


def test_mixed_dtypes_need_a_cast():
    a = te.placeholder((4,), "int8", "a")
    b = te.placeholder((4,), "int32", "b")
    with pytest.raises(TensorExprError, match="different dtypes int8 and int32"):
        te.compute((4,), lambda i: a[i] + b[i], "c")
    c = te.compute((4,), lambda i: te.cast("int32", a[i]) + b[i], "c")
    assert c.dtype == "int32"


def test_compute_checks_arity_and_variables():
    a = te.placeholder((4,), "int8", "a")
    with pytest.raises(TensorExprError, match="takes 1 arguments for a 2-d shape"):
        te.compute((4, 4), lambda i: a[i], "c")
    k = te.reduce_axis(4, "k")
    with pytest.raises(TensorExprError, match="uses variables k that are not its axes"):
        te.compute((4,), lambda i: a[i] + a[k], "c")
    with pytest.raises(TensorExprError, match="must be the whole body"):
        te.compute((4,), lambda i: te.sum(te.cast("int32", a[k]), k) + 1, "c")


def test_reduce_and_select_checks():
    with pytest.raises(TensorExprError, match="reduce_axis"):
        te.sum(E.const(1), [])
    with pytest.raises(TensorExprError, match="needs a condition"):
        te.if_then_else(E.const(1), 1, 0)
    with pytest.raises(TensorExprError, match="extent must be a positive int"):
        te.reduce_axis(0, "k")
    with pytest.raises(TensorExprError, match="unknown dtype 'float16'"):
        te.placeholder((2,), "float16", "x")


def test_affine_analysis():
    i, j = E.Var("i"), E.Var("j")
    form = te.affine((i * 3 + j - 2) * 2 + i)
    assert form is not None
    assert (form.coeff(i), form.coeff(j), form.const) == (7, 2, -4)
    assert te.affine(i * j) is None
    assert te.affine(i // 2) is None
    coeffs, rest = te.linear_coeffs(i * 4 + j + 5, [i])
    assert coeffs == [4] and rest.coeff(j) == 1 and rest.const == 5


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (100, -3), (-128, 5)])
def test_evaluate_matches_python_integers(a, b):
    x, y = E.Var("x"), E.Var("y")
    env = {x: a, y: b}
    assert E.evaluate(x // y, env) == a // b
    assert E.evaluate(x % y, env) == a % b
    assert E.evaluate(E.minimum(x, y) * 3, env) == min(a, b) * 3
    assert E.evaluate(E.cast("int8", x * 100), env) == ((a * 100 + 128) % 256) - 128
