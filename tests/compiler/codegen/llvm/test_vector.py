"""Explicit vector code for short vectorised loops (compiler.codegen.llvm.vector): which loops it
takes, and that what it computes is what the serial loop computes (integers exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import te
from compiler.codegen.cpu import compile_func
from compiler.codegen.llvm.vector import pair_dot, vectorizable
from compiler.lower.cpu import lower_host
from compiler.schedule import Schedule
from compiler.tir import stmt as S


def _innermost(node: S.Stmt) -> list[S.For]:
    if isinstance(node, S.Seq):
        return [f for s in node.stmts for f in _innermost(s)]
    if isinstance(node, S.For):
        inner = _innermost(node.body)
        return inner or [node]
    return []


def _tile(dtype: str, acc: str, rows: int = 5, lanes: int = 8, depth: int = 7):
    """acc[i, k] = sum_r cast(x[i, r]) * cast(w[r, k]): a register tile, lanes vectorised."""
    x = te.placeholder((rows, depth), dtype, "x")
    w = te.placeholder((depth, lanes), dtype, "w")
    r = te.reduce_axis(depth, "r")
    out = te.compute((rows, lanes), lambda i, k: te.sum(te.cast(acc, x[i, r]) * te.cast(acc, w[r, k]), r),
                     "out")
    s = Schedule(out)
    s.reorder("out", "r", "i", "k")
    s.vectorize("out", "k")
    return s, [x, w]


def test_a_register_tile_is_exact_in_integers():
    s, ins = _tile("int8", "int32")
    func = lower_host(s, "k", ins)
    assert all(vectorizable(f) for f in _innermost(func.body) if f.kind == "vectorize")
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (5, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (7, 8)).astype(np.int8)
    got = compile_func(func)(x, w)
    assert np.array_equal(got, x.astype(np.int64) @ w.astype(np.int64))


def test_a_float_tile_is_within_rounding():
    s, ins = _tile("float32", "float32", lanes=16)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 16)).astype(np.float32)
    got = compile_func(lower_host(s, "k", ins))(x, w)
    ref = x.astype(np.float64) @ w.astype(np.float64)
    bound = 8 * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w))
    assert np.all(np.abs(got - ref) <= bound)


def _loop(body_fn, n: int = 8, vectorize: bool = True) -> S.For:
    a = te.placeholder((n + 1,), "int32", "a")
    out = te.compute((n,), body_fn(a), "out")
    s = Schedule(out)
    if vectorize:
        s.vectorize("out", "i")
    (loop,) = _innermost(lower_host(s, "k", [a]).body)
    return loop


@pytest.mark.parametrize(("fn", "taken"), [
    (lambda a: lambda i: a[i] + a[0], True),  # contiguous and broadcast
    (lambda a: lambda i: a[i] * 3 - 1, True),
    (lambda a: lambda i: a[2 * i // 3], False),  # not affine
    (lambda a: lambda i: te.if_then_else(te.lt(a[i], 0), 0, a[i]), False),  # select: the vectoriser's
    (lambda a: lambda i: a[i] // 2, False),  # division: the vectoriser's
])
def test_which_loops_are_vector_code(fn, taken):
    assert vectorizable(_loop(fn)) is taken


def test_a_strided_load_or_a_long_loop_is_left_to_llvm():
    a = te.placeholder((64,), "int32", "a")
    out = te.compute((8,), lambda i: a[2 * i], "out")
    s = Schedule(out)
    s.vectorize("out", "i")
    (loop,) = _innermost(lower_host(s, "k", [a]).body)
    assert not vectorizable(loop)
    long = te.compute((64,), lambda i: a[i] + 1, "out")
    s = Schedule(long)
    s.vectorize("out", "i")
    (loop,) = _innermost(lower_host(s, "k", [a]).body)
    assert not vectorizable(loop)


def test_a_serial_loop_is_not_vector_code():
    assert not vectorizable(_loop(lambda a: lambda i: a[i] + 1, vectorize=False))


def _pair_tile(second: int = 1, rows: int = 3, lanes: int = 8, depth: int = 5):
    """out[i, k] = sum_r a[i, r, 0] * w[r, k, 0] + a[i, r, second] * w[r, k, second] (int16
    widened to int32): the pair-packed int8 convolution's register tile."""
    a = te.placeholder((rows, depth, 2), "int16", "a")
    w = te.placeholder((depth, lanes, 2), "int16", "w")
    r = te.reduce_axis(depth, "r")

    def term(i, k, j):  # type: ignore[no-untyped-def]
        return te.cast("int32", a[i, r, j]) * te.cast("int32", w[r, k, j])

    out = te.compute((rows, lanes), lambda i, k: te.sum(term(i, k, 0) + term(i, k, second), r), "out")
    s = Schedule(out)
    s.reorder("out", "r", "i", "k")
    s.vectorize("out", "k")
    return s, [a, w]


def _pair_step(func):  # type: ignore[no-untyped-def]
    """The vectorised loop of the reduction step (the other one zeroes the tile)."""
    loop = next(f for f in _innermost(func.body) if f.kind == "vectorize"
                and isinstance(f.body, S.Store) and not isinstance(f.body.value, te.expr.Const))
    return loop, loop.body


def test_a_pair_of_widened_products_is_one_pair_dot_and_exact():
    s, ins = _pair_tile()
    func = lower_host(s, "k", ins)
    loop, store = _pair_step(func)
    assert vectorizable(loop)
    assert isinstance(store.value, te.expr.Bin) and pair_dot(store.value.b, loop.var) is not None
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (3, 5, 2)).astype(np.int16)
    w = rng.integers(-128, 128, (5, 8, 2)).astype(np.int16)
    got = compile_func(func)(a, w)
    assert np.array_equal(got, np.einsum("irj,rkj->ik", a.astype(np.int64), w.astype(np.int64)))


def test_products_that_are_no_adjacent_pair_are_no_pair_dot():
    s, ins = _pair_tile(second=0)  # the same element twice: no interleaved pair
    loop, store = _pair_step(lower_host(s, "k", ins))
    assert isinstance(store.value, te.expr.Bin) and pair_dot(store.value.b, loop.var) is None
    assert not vectorizable(loop)  # w moves by two elements per lane: left to LLVM
