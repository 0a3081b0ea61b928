"""Constant folding."""

from __future__ import annotations

import numpy as np

from compiler.graph.passes import fold_constants
from tests.compiler.graph.passes.graphs import check_pass, make


def test_weight_made_by_nodes_folds() -> None:
    hwio = np.arange(2 * 2 * 3 * 4, dtype=np.int64).reshape(2, 2, 3, 4)
    g = make(
        {"x": (1, 3, 5, 5)},
        {"hwio": hwio},
        [
            ("Transpose", ["hwio"], "oihw", {"perm": (3, 2, 0, 1)}),
            ("Cast", ["oihw"], "w", {"to": "float32"}),
            ("Conv", ["x", "w"], "y", {"strides": (1, 1), "pads": (0,) * 4, "dilations": (1, 1)}),
        ],
        ["y"],
    )
    out = check_pass(
        fold_constants,
        g,
        """\
graph main(x: float32[1,3,5,5]) -> (y)
  const w: float32[4,3,2,2]
  y: float32[1,4,4,4] = Conv(x, w) dilations=[1,1] group=1 pads=[0,0,0,0] strides=[1,1]""",
    )
    np.testing.assert_array_equal(out.values["w"].data, hwio.transpose(3, 2, 0, 1).astype(np.float32))


def test_shape_chain_of_a_non_constant_tensor_folds() -> None:
    g = make(
        {"x": (2, 3, 4)},
        {"zero": np.array(0, np.int64), "minus": np.array([-1], np.int64)},
        [
            ("Shape", ["x"], "s", {"end": 3}),
            ("Gather", ["s", "zero"], "n", {}),
            ("Unsqueeze", ["n"], "n1", {"axes": (0,)}),
            ("Concat", ["n1", "minus"], "dims", {"axis": 0}),
            ("ConstantOfShape", [], "ones", {"shape": (2, 12), "value": 1.0}),
            ("Reshape", ["x"], "flat", {"shape": (2, 12)}),
            ("Add", ["flat", "ones"], "y", {}),
        ],
        ["y", "dims"],
    )
    check_pass(
        fold_constants,
        g,
        """\
graph main(x: float32[2,3,4]) -> (y, dims)
  const ones: float32[2,12]
  const dims: int64[2] = [2, -1]
  flat: float32[2,12] = Reshape(x) shape=[2,12]
  y: float32[2,12] = Add(flat, ones)""",
    )


def test_quantize_dequantize_stay() -> None:
    g = make(
        {"x": (2, 3)},
        {
            "wq": np.array([[1, -2, 3]], np.int8).repeat(4, 0),
            "s": np.full(4, 0.5, np.float32),
            "z": np.zeros(4, np.int8),
        },
        [
            ("DequantizeLinear", ["wq", "s", "z"], "w", {"axis": 0}),
            ("Gemm", ["x", "w"], "y", {"transB": 1}),
        ],
        ["y"],
    )
    check_pass(
        fold_constants,
        g,
        """\
graph main(x: float32[2,3]) -> (y)
  const wq: int8[4,3]
  const s: float32[4] = [0.5, 0.5, 0.5, 0.5]
  const z: int8[4] = [0, 0, 0, 0]
  w: float32[4,3] = DequantizeLinear(wq, s, z) axis=0
  y: float32[2,4] = Gemm(x, w) alpha=1.0 beta=1.0 transA=0 transB=1""",
    )
