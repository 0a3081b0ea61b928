"""Explicit Pad nodes folded into the Conv or pooling after them (TF-style "same" padding)."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_onnx
from compiler.graph.passes import fold_pads, simplify
from tests.compiler.graph.passes.graphs import check_pass, make

W = np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32)


def _pad(pads: tuple[int, ...], value: float = 0.0) -> dict[str, object]:
    return {"pads": pads, "mode": "constant", "value": value}


def _conv(pads: tuple[int, ...] = (0, 0, 0, 0), stride: int = 2) -> dict[str, object]:
    return {"strides": (stride, stride), "pads": pads, "group": 1, "dilations": (1, 1)}


def test_asymmetric_pad_folds_into_the_conv_pads() -> None:
    g = make({"x": (1, 2, 8, 8)}, {"w": W},
             [("Pad", ["x"], "p", _pad((0, 0, 0, 1, 0, 0, 1, 2))),
              ("Conv", ["p", "w"], "y", _conv((1, 0, 0, 0)))],
             ["y"])
    check_pass(fold_pads, g, """\
graph main(x: float32[1,2,8,8]) -> (y)
  const w: float32[4,2,3,3]
  y: float32[1,4,4,5] = Conv(x, w) dilations=[1,1] group=1 pads=[1,1,1,2] strides=[2,2]""")


def test_pools_fold_only_with_the_value_their_padding_stands_for() -> None:
    avg = {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1),
           "ceil_mode": 0}
    g = make({"x": (1, 2, 6, 6)}, {},
             [("Pad", ["x"], "p", _pad((0, 0, 1, 1, 0, 0, 1, 1))),
              ("AveragePool", ["p"], "a", {**avg, "count_include_pad": 1}),
              ("AveragePool", ["p"], "b", {**avg, "count_include_pad": 0}),
              ("Pad", ["x"], "q", _pad((0, 0, 1, 1, 0, 0, 1, 1), -math.inf)),
              ("MaxPool", ["q"], "m", avg),
              ("MaxPool", ["p"], "n", avg),
              ("Add", ["a", "b"], "s", {}), ("Add", ["m", "n"], "t", {}), ("Add", ["s", "t"], "y", {})],
             ["y"])
    out = check_pass(fold_pads, g, """\
graph main(x: float32[1,2,6,6]) -> (y)
  p: float32[1,2,8,8] = Pad(x) mode='constant' pads=[0,0,1,1,0,0,1,1] value=0.0
  a: float32[1,2,6,6] = AveragePool(x) ceil_mode=0 count_include_pad=1 dilations=[1,1] kernel_shape=[3,3] \
pads=[1,1,1,1] strides=[1,1]
  b: float32[1,2,6,6] = AveragePool(p) ceil_mode=0 count_include_pad=0 dilations=[1,1] kernel_shape=[3,3] \
pads=[0,0,0,0] strides=[1,1]
  m: float32[1,2,6,6] = MaxPool(x) ceil_mode=0 dilations=[1,1] kernel_shape=[3,3] pads=[1,1,1,1] strides=[1,1]
  n: float32[1,2,6,6] = MaxPool(p) ceil_mode=0 dilations=[1,1] kernel_shape=[3,3] pads=[0,0,0,0] strides=[1,1]
  s: float32[1,2,6,6] = Add(a, b)
  t: float32[1,2,6,6] = Add(m, n)
  y: float32[1,2,6,6] = Add(s, t)""")
    assert sum(n.op == "Pad" for n in out.nodes) == 1


def test_pads_of_batch_or_channels_reflect_mode_or_nonzero_value_stay() -> None:
    for pad in (_pad((0, 1, 0, 0, 0, 0, 0, 0)), _pad((0, 0, 1, 1, 0, 0, 1, 1), 0.5),
                {"pads": (0, 0, 1, 1, 0, 0, 1, 1), "mode": "reflect", "value": 0.0}):
        shape = (1, 2 + pad["pads"][1], 8, 8)  # type: ignore[index]
        g = make({"x": (1, 2, 8, 8)}, {"w": np.ones((4, shape[1], 3, 3), np.float32)},
                 [("Pad", ["x"], "p", pad), ("Conv", ["p", "w"], "y", _conv())], ["y"])
        assert [n.op for n in fold_pads(g).nodes] == ["Pad", "Conv"]


def _torch_pad_chain_model() -> onnx.ModelProto:
    """What torch.onnx.export (opset 17) writes for F.pad(x, [0, 1, 0, 1]) before a Conv."""
    def const(name: str, values: list[int]) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name],
                                value=numpy_helper.from_array(np.array(values, np.int64)))
    nodes = [
        const("pads", [0, 1, 0, 1]), const("ext", [4]),
        helper.make_node("ConstantOfShape", ["ext"], ["zeros"],
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Concat", ["pads", "zeros"], ["cat"], axis=0),
        const("shape2", [-1, 2]), helper.make_node("Reshape", ["cat", "shape2"], ["rows"]),
        const("st", [-1]), const("en", [-(2**63) + 1]), const("ax", [0]), const("sp", [-1]),
        helper.make_node("Slice", ["rows", "st", "en", "ax", "sp"], ["flip"]),
        helper.make_node("Transpose", ["flip"], ["cols"], perm=[1, 0]),
        const("flat", [-1]), helper.make_node("Reshape", ["cols", "flat"], ["onnx_pads"]),
        helper.make_node("Cast", ["onnx_pads"], ["pads64"], to=TensorProto.INT64),
        helper.make_node("Pad", ["x", "pads64"], ["p"], mode="constant"),
        helper.make_node("Conv", ["p", "w"], ["y"], strides=[2, 2], kernel_shape=[3, 3]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])
    graph = helper.make_graph(nodes, "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(W, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_torch_exporters_pad_chain_imports_and_folds(tmp_path: object) -> None:
    import onnxruntime as ort

    model = _torch_pad_chain_model()
    g = simplify(import_onnx(model))
    assert [n.op for n in g.nodes] == ["Conv"]
    assert g.nodes[0].ints_attr("pads") == (0, 0, 1, 1)
    from compiler.graph.interp import run_graph

    x = np.random.default_rng(1).standard_normal((1, 2, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(run_graph(g, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
