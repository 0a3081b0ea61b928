"""Small float graphs for the quantizer's tests, with seeded weights and inputs."""

from __future__ import annotations

import numpy as np

from compiler.graph import Graph, const
from compiler.graph.builder import append


def _conv_attrs(pad: int, stride: int = 1, group: int = 1) -> dict[str, object]:
    return {"strides": (stride, stride), "pads": (pad,) * 4, "dilations": (1, 1), "group": group}


def small_cnn(seed: int = 0) -> Graph:
    """x[1,3,10,10] -> conv+relu -> conv -> add(residual)+relu -> maxpool -> depthwise conv +
    Clip(0, 6) -> global average pool -> flatten -> gemm -> logits[1,10]."""
    rng = np.random.default_rng(seed)
    g = Graph("small_cnn")
    g.add_input("x", (1, 3, 10, 10), "float32")

    def param(name: str, shape: tuple[int, ...], scale: float) -> str:
        g.add_value(const(name, (rng.standard_normal(shape) * scale).astype(np.float32)))
        return name

    append(g, "Conv", ["x", param("w1", (8, 3, 3, 3), 0.3), param("b1", (8,), 0.1)], ["c1"], _conv_attrs(1))
    append(g, "Relu", ["c1"], ["r1"])
    append(g, "Conv", ["r1", param("w2", (8, 8, 3, 3), 0.1), param("b2", (8,), 0.1)], ["c2"], _conv_attrs(1))
    append(g, "Add", ["c2", "r1"], ["a"])
    append(g, "Relu", ["a"], ["r2"])
    pool = {"kernel_shape": (2, 2), "strides": (2, 2), "pads": (0, 0, 0, 0), "dilations": (1, 1)}
    append(g, "MaxPool", ["r2"], ["p"], pool)
    append(
        g,
        "Conv",
        ["p", param("w3", (8, 1, 3, 3), 0.4), param("b3", (8,), 0.1)],
        ["c3"],
        _conv_attrs(1, group=8),
    )
    append(g, "Clip", ["c3"], ["r3"], {"min": 0.0, "max": 6.0})
    append(g, "GlobalAveragePool", ["r3"], ["gap"])
    append(g, "Flatten", ["gap"], ["f"], {"axis": 1})
    append(g, "Gemm", ["f", param("w4", (10, 8), 0.5), param("b4", (10,), 0.1)], ["logits"],
           {"transB": 1})
    g.outputs = ["logits"]
    return g


def inputs(graph: Graph, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Seeded standard-normal float32 inputs for every graph input."""
    rng = np.random.default_rng(seed)
    return [
        {n: rng.standard_normal(graph.values[n].shape).astype(np.float32) for n in graph.inputs}
        for _ in range(count)
    ]
