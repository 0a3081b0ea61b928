"""A ShuffleNet-style model written with onnx.helper: units of a grouped 1x1 convolution, a
channel shuffle (Reshape, Transpose, Reshape), a depthwise 3x3 convolution and a grouped 1x1
convolution back, with a residual Add; then a classifier."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def shufflenet_units(channels: int = 240, groups: int = 3, size: int = 14, units: int = 2,
                     classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def weight(name: str, shape: tuple[int, ...]) -> str:
        data = rng.normal(size=shape) / np.sqrt(np.prod(shape[1:]))
        inits.append(numpy_helper.from_array(data.astype(np.float32), name))
        return name

    def ints(name: str, values: list[int]) -> str:
        inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: object) -> None:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))

    mid = channels // 4
    x = "x"
    for u in range(units):
        p = f"u{u}"
        node("Conv", [x, weight(f"{p}.w1", (mid, channels // groups, 1, 1)), weight(f"{p}.b1", (mid,))],
             f"{p}.c1", group=groups)
        node("Relu", [f"{p}.c1"], f"{p}.r1")
        node("Reshape", [f"{p}.r1", ints(f"{p}.s5", [1, groups, mid // groups, size, size])], f"{p}.g")
        node("Transpose", [f"{p}.g"], f"{p}.t", perm=[0, 2, 1, 3, 4])
        node("Reshape", [f"{p}.t", ints(f"{p}.s4", [1, mid, size, size])], f"{p}.sh")
        node("Conv", [f"{p}.sh", weight(f"{p}.wd", (mid, 1, 3, 3))], f"{p}.dw", group=mid, pads=[1, 1, 1, 1])
        node("Conv", [f"{p}.dw", weight(f"{p}.w2", (channels, mid // groups, 1, 1)),
                      weight(f"{p}.b2", (channels,))], f"{p}.c2", group=groups)
        node("Add", [f"{p}.c2", x], f"{p}.sum")
        node("Relu", [f"{p}.sum"], f"{p}.y")
        x = f"{p}.y"
    node("GlobalAveragePool", [x], "pool")
    node("Flatten", ["pool"], "flat")
    fc = [weight("fc.w", (classes, channels)), weight("fc.b", (classes,))]
    node("Gemm", ["flat", *fc], "logits", transB=1)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])]
    graph = helper.make_graph(nodes, "shufflenet_units", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
