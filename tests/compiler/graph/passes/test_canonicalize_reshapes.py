"""One spelling for reshape chains, flatten before a dense layer and global pooling."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph.passes import canonicalize_reshapes
from compiler.graph.passes.canonicalize_reshapes import flatten_axis
from tests.compiler.graph.passes.graphs import check_pass, make

W = np.random.default_rng(0).normal(size=(7, 24)).astype(np.float32)
B = np.zeros(7, np.float32)


def test_reshape_chain_becomes_one_reshape() -> None:
    g = make(
        {"x": (2, 3, 4)},
        {},
        [
            ("Unsqueeze", ["x"], "u", {"axes": (0,)}),
            ("Flatten", ["u"], "f", {"axis": 2}),
            ("Reshape", ["f"], "r", {"shape": (4, 6)}),
            ("Relu", ["r"], "y", {}),
        ],
        ["y"],
    )
    check_pass(
        canonicalize_reshapes,
        g,
        """\
graph main(x: float32[2,3,4]) -> (y)
  r: float32[4,6] = Reshape(x) shape=[4,6]
  y: float32[4,6] = Relu(r)""",
    )


@pytest.mark.parametrize(
    "op,attrs",
    [("Reshape", {"shape": (2, 24)}), ("Flatten", {"axis": 1})],
)
def test_flatten_before_gemm(op: str, attrs: dict[str, object]) -> None:
    g = make(
        {"x": (2, 3, 2, 4)},
        {"w": W, "b": B},
        [(op, ["x"], "f", attrs), ("Gemm", ["f", "w", "b"], "y", {"transB": 1})],
        ["y"],
    )
    check_pass(
        canonicalize_reshapes,
        g,
        """\
graph main(x: float32[2,3,2,4]) -> (y)
  const w: float32[7,24]
  const b: float32[7]
  f: float32[2,24] = Flatten(x) axis=1
  y: float32[2,7] = Gemm(f, w, b) alpha=1.0 beta=1.0 transA=0 transB=1""",
    )


def test_squeeze_of_pooled_features_before_gemm() -> None:
    w = W[:, :3].copy()
    g = make(
        {"x": (1, 3, 1, 1)},
        {"w": w, "b": B},
        [("Squeeze", ["x"], "s", {"axes": (2, 3)}), ("Gemm", ["s", "w", "b"], "y", {"transB": 1})],
        ["y"],
    )
    check_pass(
        canonicalize_reshapes,
        g,
        """\
graph main(x: float32[1,3,1,1]) -> (y)
  const w: float32[7,3]
  const b: float32[7]
  s: float32[1,3] = Flatten(x) axis=1
  y: float32[1,7] = Gemm(s, w, b) alpha=1.0 beta=1.0 transA=0 transB=1""",
    )


def test_reshape_not_feeding_a_gemm_stays() -> None:
    g = make(
        {"x": (2, 3, 4)}, {}, [("Reshape", ["x"], "r", {"shape": (2, 12)}), ("Relu", ["r"], "y", {})], ["y"]
    )
    assert [n.op for n in canonicalize_reshapes(g).nodes] == ["Reshape", "Relu"]


@pytest.mark.parametrize(
    "src,dst,axis",
    [
        ((2, 3, 4), (2, 12), 1),
        ((1, 5, 1, 1), (1, 5), 1),
        ((1, 8, 4), (8, 4), 2),
        ((2, 3), (1, 6), 0),
        ((2, 3), (3, 2), None),
    ],
)
def test_flatten_axis(src: tuple[int, ...], dst: tuple[int, ...], axis: int | None) -> None:
    assert flatten_axis(src, dst) == axis


def test_spatial_means_become_global_pools() -> None:
    g = make(
        {"x": (2, 3, 4, 5)},
        {},
        [
            ("ReduceMean", ["x"], "m", {"axes": (2, 3)}),
            ("ReduceMax", ["x"], "n", {"axes": (2, 3), "keepdims": 0}),
        ],
        ["m", "n"],
    )
    check_pass(
        canonicalize_reshapes,
        g,
        """\
graph main(x: float32[2,3,4,5]) -> (m, n)
  m: float32[2,3,1,1] = GlobalAveragePool(x)
  n/pooled: float32[2,3,1,1] = GlobalMaxPool(x)
  n: float32[2,3] = Flatten(n/pooled) axis=1""",
    )


def test_sequence_and_partial_means_stay() -> None:
    g = make(
        {"x": (2, 3, 4), "z": (2, 3, 4, 5)},
        {},
        [("ReduceMean", ["x"], "m", {"axes": (2,)}), ("ReduceMean", ["z"], "n", {"axes": (3,)})],
        ["m", "n"],
    )
    assert [n.op for n in canonicalize_reshapes(g).nodes] == ["ReduceMean", "ReduceMean"]


def test_transpose_chain_composes() -> None:
    g = make(
        {"x": (2, 3, 4)},
        {},
        [("Transpose", ["x"], "a", {"perm": (1, 2, 0)}), ("Transpose", ["a"], "y", {"perm": (0, 2, 1)})],
        ["y"],
    )
    check_pass(
        canonicalize_reshapes,
        g,
        """\
graph main(x: float32[2,3,4]) -> (y)
  y: float32[3,2,4] = Transpose(x) perm=[1,0,2]""",
    )
