"""MatMul (batched, broadcasting, rank 1 operands) and the float Gemm on the host.

Float results are compared with float64 numpy within the bound of a float32 sum of K products in
any order: |got - ref| <= (K + 2) * 2**-24 * (|a| @ |b|) (+ |bias|), elementwise (the kernels sum
in k order, or in a few vectorised partial sums; FMAs round less).  Integer products wrap exactly as
numpy's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.opdefs import OPS, make_attrs
from compiler.ops.cpu import Gemm, MatMul
from compiler.ops.cpu.matmul import GEMM_TILED_ROWS, matmul_tile
from compiler.ops.cpu.norm import Gelu
from compiler.target.cpu import CpuTarget
from tests.compiler.ops.cpu.util import SIZES, assert_exact, run

U = 2.0**-24


def assert_within_sum_bound(got: np.ndarray, ref: np.ndarray, magnitude: np.ndarray, k: int) -> None:
    assert got.dtype == np.float32 and got.shape == ref.shape
    bound = (k + 2) * U * magnitude + 1e-30
    excess = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / bound
    assert excess.max(initial=0.0) <= 1.0, f"error {excess.max():.2f} times the bound"


def check_matmul(op: MatMul, seed: int) -> np.ndarray:
    a, b = op.random_inputs(seed)
    got, ref = run(op, inputs=[a, b])
    sa = (1, *a.shape) if a.ndim == 1 else a.shape
    sb = (*b.shape, 1) if b.ndim == 1 else b.shape
    magnitude = np.matmul(np.abs(a.reshape(sa).astype(np.float64)), np.abs(b.reshape(sb).astype(np.float64)))
    assert_within_sum_bound(got, ref, magnitude, sa[-1])
    return got


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Batch dimensions of two operands that broadcast: suffixes of one shape, some dims 1."""
    out = draw(st.lists(st.sampled_from([2, 3]), max_size=3))

    def operand() -> list[int]:
        rank = draw(st.integers(0, len(out)))
        return [d if draw(st.booleans()) else 1 for d in out[len(out) - rank :]]

    return operand(), operand()


@settings(max_examples=12, deadline=None, derandomize=True)
@given(batches(), SIZES, SIZES, SIZES, st.integers(0, 99))
def test_float_matmul_broadcasts_batches(batch, m, k, n, seed):
    batch_a, batch_b = batch
    op = MatMul((*batch_a, m, k), (*batch_b, k, n))
    got = check_matmul(op, seed)
    a, b = op.random_inputs(seed)
    (want,) = OPS["MatMul"].evaluate([a, b], make_attrs("MatMul", {}))
    assert got.shape == want.shape


@pytest.mark.parametrize("a_shape,b_shape,out_shape", [
    ((7,), (7, 5), (1, 5)), ((3, 7), (7,), (3, 1)), ((9,), (2, 9, 4), (2, 1, 4)), ((1,), (1,), (1, 1)),
    ((2, 1, 3, 5), (4, 5, 17), (2, 4, 3, 17)),
])
def test_matmul_promotes_rank_1_operands(a_shape, b_shape, out_shape):
    op = MatMul(a_shape, b_shape)
    assert op.out_shape == out_shape
    got = check_matmul(op, seed=5)
    a, b = op.random_inputs(5)
    assert got.size == np.matmul(a, b).size


@pytest.mark.parametrize("a_shape,b_shape", [((1, 2, 128, 64), (1, 2, 64, 128)),
                                             ((1, 2, 128, 128), (1, 2, 128, 64))])
def test_matmul_bert_tiny_attention(a_shape, b_shape):
    check_matmul(MatMul(a_shape, b_shape), seed=1)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.sampled_from(["int8", "int32", "int64", "uint8"]), SIZES, SIZES, SIZES, st.integers(0, 99))
def test_integer_matmul_wraps_like_numpy(dtype, m, k, n, seed):
    op = MatMul((2, m, k), (k, n), dtype)
    assert_exact(op, seed)
    a, b = op.random_inputs(seed)
    (want,) = OPS["MatMul"].evaluate([a, b], make_attrs("MatMul", {}))
    assert np.array_equal(run(op, inputs=[a, b])[0], want)


def test_matmul_schedule_is_a_register_tile():
    op = MatMul((1, 2, 128, 64), (1, 2, 64, 128))
    s = op.schedule(op.tensors())
    assert s.stage("out").leaves == ["i0", "i1", "i3.o", "i2.o", "i2.i", "i3.i"]
    assert s.stage("acc").leaves == ["i0", "i1", "rk", "i2", "i3"]
    assert s.stage("acc").attach == ("out", "i2.o")
    assert s.stage("acc").loop_kinds == {"i3": "vectorize"}
    assert s.stage("out").loop_kinds == {"i3.i": "vectorize"}


AVX2 = CpuTarget("x86_64-unknown-linux-gnu", "znver3", "+avx,+avx2,+fma")  # 16 ymm
AVX512 = CpuTarget("x86_64-unknown-linux-gnu", "znver4", "+avx,+avx2,+fma,+avx512f")  # 32 zmm


@pytest.mark.parametrize("m,n,target,tile", [
    (128, 512, AVX2, (4, 16)), (128, 64, AVX2, (4, 16)), (128, 8, AVX2, (8, 8)),
    (7, 16, AVX2, (1, 16)), (30, 24, AVX2, (6, 8)), (128, 512, AVX512, (8, 32)), (5, 12, AVX2, None),
])
def test_matmul_tile_follows_the_target(m, n, target, tile):
    assert matmul_tile(m, n, "float32", target) == tile
    assert matmul_tile(m, n, "int32", target) is None


@pytest.mark.parametrize("bias,residual,gelu", [(True, False, False), (True, True, False),
                                                (True, False, True), (False, True, True)])
@pytest.mark.parametrize("a_shape,b_shape", [((1, 24, 40), (40, 32)), ((2, 12, 9), (9, 64))])
def test_matmul_fused_epilogue(a_shape, b_shape, bias, residual, gelu):
    plain = MatMul(a_shape, b_shape)
    op = MatMul(a_shape, b_shape, bias=bias, residual=residual, gelu=gelu)
    a, b, *extra = op.random_inputs(3)
    got = op.build()(a, b, *extra)
    product = plain.build()(a, b)
    magnitude = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert_within_sum_bound(product, plain.reference(a, b), magnitude, a_shape[-1])
    want = product  # the separate operators, each rounded to float32
    for vector in extra:
        want = want + vector
    if gelu:
        want = Gelu(want.shape).reference(want)
    slack = (a_shape[-1] + 8) * U * (magnitude + sum(np.abs(v) for v in extra)) + 1e-6 * np.abs(want)
    assert np.all(np.abs(got.astype(np.float64) - want) <= slack + 1e-30)


def test_matmul_epilogue_needs_the_register_tile():
    with pytest.raises(ValueError, match=r"matmul: a fused epilogue needs the float register tile, "
                                         r"which int32 \(4, 5\) does not take"):
        MatMul((4, 3), (3, 5), "int32", bias=True)
    with pytest.raises(ValueError, match="matmul: gelu must be a bool, not 1"):
        MatMul((4, 3), (3, 8), gelu=1)


def test_matmul_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"inner dimensions of \(2, 3\) and \(4, 5\) differ"):
        MatMul((2, 3), (4, 5))
    with pytest.raises(ValueError, match=r"shapes \(2,\) and \(3,\) do not broadcast"):
        MatMul((2, 4, 3), (3, 3, 5))


def check_gemm(op: Gemm, seed: int) -> None:
    inputs = op.random_inputs(seed)
    got, ref = run(op, inputs=inputs)
    data, weight = inputs[0], inputs[1]
    magnitude = np.abs(data.astype(np.float64)) @ np.abs(weight.astype(np.float64)).T
    if op.bias:
        magnitude = magnitude + np.abs(inputs[2].astype(np.float64))
    assert_within_sum_bound(got, ref, magnitude, op.shape[1] + 1)
    attrs = make_attrs("Gemm", {"transB": 1})
    (want,) = OPS["Gemm"].evaluate(inputs, attrs)
    assert_within_sum_bound(got, want, magnitude, 2 * (op.shape[1] + 1))  # numpy's own rounding too


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.sampled_from([1, 2, 3, 33, 40]), SIZES, SIZES, st.booleans(), st.integers(0, 99))
def test_gemm(m, k, n, bias, seed):
    op = Gemm((m, k), (n, k), bias)
    assert op.tiled == (m >= GEMM_TILED_ROWS and n >= 4)
    check_gemm(op, seed)


@pytest.mark.parametrize("shape,weight_shape", [((1, 128), (2, 128)), ((1, 512), (1000, 512)),
                                                ((64, 96), (48, 96))])
def test_gemm_classifier_shapes(shape, weight_shape):
    check_gemm(Gemm(shape, weight_shape), seed=2)


def test_gemm_rejects_a_weight_of_other_features():
    with pytest.raises(ValueError, match=r"weight \(2, 5\) does not take inputs of 4 features"):
        Gemm((1, 4), (2, 5))
