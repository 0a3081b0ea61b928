"""Dense layers normalised to Gemm(A, W[N, K], b[N]) with transB=1."""

from __future__ import annotations

import numpy as np

from compiler.graph.passes import normalize_gemm
from tests.compiler.graph.passes.graphs import check_pass, make

RNG = np.random.default_rng(0)
W = RNG.normal(size=(4, 5)).astype(np.float32)  # [K, N]
C = RNG.normal(size=(1, 5)).astype(np.float32)
CANONICAL = """\
graph main(x: float32[2,4]) -> (y)
  const w: float32[5,4]
  const c: float32[5]
  y: float32[2,5] = Gemm(x, w, c) alpha=1.0 beta=1.0 transA=0 transB=1"""


def test_alpha_beta_and_layout_fold_into_the_constants() -> None:
    g = make(
        {"x": (2, 4)}, {"w": W, "c": C}, [("Gemm", ["x", "w", "c"], "y", {"alpha": 2.0, "beta": 0.5})], ["y"]
    )
    out = check_pass(normalize_gemm, g, CANONICAL)
    np.testing.assert_allclose(out.values["w"].data, 2 * W.T, rtol=1e-6)
    np.testing.assert_allclose(out.values["c"].data, 0.5 * C[0], rtol=1e-6)


def test_missing_bias_becomes_zeros() -> None:
    g = make({"x": (2, 4)}, {"w": W.T.copy()}, [("Gemm", ["x", "w"], "y", {"transB": 1})], ["y"])
    out = check_pass(
        normalize_gemm,
        g,
        """\
graph main(x: float32[2,4]) -> (y)
  const w: float32[5,4]
  const y.bias: float32[5]
  y: float32[2,5] = Gemm(x, w, y.bias) alpha=1.0 beta=1.0 transA=0 transB=1""",
    )
    np.testing.assert_array_equal(out.values["w"].data, W.T)


def test_transposed_input_gets_a_transpose() -> None:
    g = make({"x": (4, 2)}, {"w": W, "c": C[0]}, [("Gemm", ["x", "w", "c"], "y", {"transA": 1})], ["y"])
    check_pass(
        normalize_gemm,
        g,
        """\
graph main(x: float32[4,2]) -> (y)
  const w: float32[5,4]
  const c: float32[5]
  x/T: float32[2,4] = Transpose(x) perm=[1,0]
  y: float32[2,5] = Gemm(x/T, w, c) alpha=1.0 beta=1.0 transA=0 transB=1""",
    )


def test_forms_it_leaves_alone() -> None:
    full = RNG.normal(size=(2, 5)).astype(np.float32)  # rows differ: not a bias vector
    g = make(
        {"x": (2, 4), "b": (4, 5)},
        {"w": W, "full": full},
        [("Gemm", ["x", "w", "full"], "y", {}), ("Gemm", ["x", "b"], "z", {"alpha": 2.0})],
        ["y", "z"],
    )
    assert [dict(n.attrs) for n in normalize_gemm(g).nodes] == [dict(n.attrs) for n in g.nodes]


def test_matmul_and_bias_add_become_one_gemm() -> None:
    g = make(
        {"x": (2, 4)},
        {"w": W, "c": C[0]},
        [("MatMul", ["x", "w"], "m", {}), ("Add", ["c", "m"], "y", {})],
        ["y"],
    )
    out = check_pass(normalize_gemm, g, CANONICAL)
    np.testing.assert_array_equal(out.values["w"].data, W.T)


def test_matmul_whose_product_is_read_twice_keeps_its_add() -> None:
    g = make(
        {"x": (2, 4)},
        {"w": W, "c": C[0]},
        [("MatMul", ["x", "w"], "m", {}), ("Add", ["m", "c"], "y", {}), ("Relu", ["m"], "r", {})],
        ["y", "r"],
    )
    check_pass(
        normalize_gemm,
        g,
        """\
graph main(x: float32[2,4]) -> (y, r)
  const w: float32[5,4]
  const m.bias: float32[5]
  const c: float32[5]
  m: float32[2,5] = Gemm(x, w, m.bias) alpha=1.0 beta=1.0 transA=0 transB=1
  y: float32[2,5] = Add(m, c)
  r: float32[2,5] = Relu(m)""",
    )


def test_batched_matmul_stays() -> None:
    g = make({"x": (5, 2, 4)}, {"w": W}, [("MatMul", ["x", "w"], "y", {})], ["y"])
    assert [n.op for n in normalize_gemm(g).nodes] == ["MatMul"]
