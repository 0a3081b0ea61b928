"""Transpose, gather and cast on the host: exactly numpy's results (and the op table's), any
rank, sizes 1 and odd, bool tensors included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.opdefs import OPS, make_attrs
from compiler.ops.cpu import Cast, Gather, Transpose, compile_host_op
from compiler.ops.cpu.tensor import TILE_ELEMS
from tests.compiler.ops.cpu.util import SIZES, assert_exact, run

DTYPES = st.sampled_from(["float32", "int8", "int32", "int64", "uint8", "bool"])


def _evaluate(op: str, inputs: list[np.ndarray], **attrs: object) -> np.ndarray:
    (out,) = OPS[op].evaluate(inputs, make_attrs(op, attrs))
    return out  # type: ignore[no-any-return]


# -- transpose -------------------------------------------------------------------------------------


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.lists(SIZES, min_size=1, max_size=4).flatmap(
    lambda shape: st.tuples(st.just(tuple(shape)), st.permutations(range(len(shape))))),
    DTYPES, st.integers(0, 99))
def test_transpose_any_rank_and_permutation(shape_perm, dtype, seed):
    shape, perm = shape_perm
    op = Transpose(shape, tuple(perm), dtype)
    got, ref = run(op, seed)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, ref)
    assert np.array_equal(got, _evaluate("Transpose", op.random_inputs(seed), perm=tuple(perm)))


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 2, 3, 1)])
def test_transpose_bert_tiny_heads(perm):
    assert_exact(Transpose((1, 128, 2, 64), perm), seed=1)


def test_a_large_transpose_is_tiled_and_exact():
    op = Transpose((256, 1024), (1, 0))
    assert TILE_ELEMS <= 256 * 1024 and "i0.i" in op.schedule(op.tensors()).stage("out").leaves
    assert_exact(op, seed=2)
    assert_exact(Transpose((8, 2, 4096, 8), (0, 3, 1, 2), "int8"), seed=3)  # tiled, rank 4


def test_transpose_rejects_a_bad_permutation():
    with pytest.raises(ValueError, match=r"perm \(0, 0\) is not a permutation of the 2 axes"):
        Transpose((2, 3), (0, 0))
    with pytest.raises(ValueError, match="data dtype must be one of"):
        Transpose((2, 3), (1, 0), "float64")


# -- gather ----------------------------------------------------------------------------------------


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.lists(SIZES, min_size=1, max_size=3), st.lists(SIZES, min_size=1, max_size=2), st.data(),
       DTYPES, st.sampled_from(["int32", "int64"]), st.integers(0, 99))
def test_gather_any_axis(shape, indices_shape, data, dtype, index_dtype, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    op = Gather(tuple(shape), tuple(indices_shape), axis, dtype, index_dtype)
    inputs = op.random_inputs(seed)  # indices in [-dim, dim): negative ones count from the end
    got, ref = run(op, inputs=inputs)
    assert got.shape == ref.shape == op.out_shape and got.dtype == np.dtype(dtype)
    assert np.array_equal(got, ref)
    assert np.array_equal(got, _evaluate("Gather", inputs, axis=axis))


def test_gather_embedding_lookup_of_bert_tiny():
    op = Gather((30522, 128), (1, 128))
    table, ids = op.random_inputs(0)
    ids[0, :3] = [0, 30521, -1]
    got, _ = run(op, inputs=[table, ids])
    assert np.array_equal(got, table[np.where(ids < 0, ids + 30522, ids)])
    assert np.array_equal(got[0, 2], table[-1])


def test_gather_clamps_indices_out_of_range():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([3, -4, 7, -100, 2], np.int64)  # the interpreter raises IndexError for these
    got, ref = run(Gather((3, 4), (5,), axis=1), inputs=[data, indices])
    assert np.array_equal(got, ref) and np.array_equal(got[0], [3, 0, 3, 0, 2])


# -- cast ------------------------------------------------------------------------------------------


@settings(max_examples=16, deadline=None, derandomize=True)
@given(st.lists(SIZES, min_size=1, max_size=3), DTYPES, DTYPES, st.integers(0, 99))
def test_cast_between_any_two_dtypes(shape, src, dst, seed):
    op = Cast(tuple(shape), src, dst)
    inputs = op.random_inputs(seed)  # floats inside the target's range
    got, ref = run(op, inputs=inputs)
    assert got.dtype == ref.dtype == np.dtype(dst) and np.array_equal(got, ref)
    assert np.array_equal(got, _evaluate("Cast", inputs, to=dst))


def test_cast_edge_values():
    x = np.array([-2.7, -0.5, -0.0, 0.0, 0.5, 2.7, 127.9, -128.9, np.nan, np.inf, 1e-45], np.float32)
    kernel = compile_host_op("cast", shape=x.shape, dtype="float32", to="int8")
    # truncation toward zero; NaN and values outside int8 saturate (numpy's astype: undefined)
    assert kernel(x).tolist() == [-2, 0, 0, 0, 0, 2, 127, -128, 0, 127, 0]
    to_bool = compile_host_op("cast", shape=x.shape, dtype="float32", to="bool")(x)
    assert to_bool.dtype == np.bool_ and np.array_equal(to_bool, x.astype(bool))  # NaN -> True
    ints = np.array([0, 1, -1, 255, 256, -(2**40), 2**24 + 1, 2**62 + 2**38 + 1, -(2**53) - 1], np.int64)
    for to in ("bool", "uint8", "int8", "int32", "float32"):  # wrapping; to float: nearest even
        got = compile_host_op("cast", shape=ints.shape, dtype="int64", to=to)(ints)
        assert np.array_equal(got, ints.astype(to)), to


def test_bool_kernels_take_and_fill_bool_arrays():
    mask = np.array([[True, False, True], [False, False, True]])
    kernel = compile_host_op("transpose", shape=(2, 3), perm=(1, 0), dtype="bool")
    assert kernel.inputs[0].dtype == "uint8"  # stored as bytes
    out = np.zeros((3, 2), np.bool_)
    assert kernel(mask, out=out) is out and np.array_equal(out, mask.T)
    floats = compile_host_op("cast", shape=(2, 3), dtype="bool", to="float32")(mask)
    assert floats.dtype == np.float32 and np.array_equal(floats, mask.astype(np.float32))
