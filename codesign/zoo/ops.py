"""ONNX operators as a converter writes them, each evaluated in numpy on the calibration batch.

Every function adds one node (or the few nodes an exporter writes for one framework op) to a
`GraphWriter` and returns its output `Value`. Where the ONNX form depends on the opset (Clip's
bounds, Gelu) the function writes the form of the writer's opset.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.zoo import numeric
from codesign.zoo.writer import GraphWriter, Value

# The last opset with Clip's bounds as attributes, and the first with a Gelu operator.
CLIP_ATTRS_UNTIL = 10
GELU_OP_SINCE = 20


def conv(g: GraphWriter, x: Value, weight: Value, bias: Value | None, *, name: str, stride: int = 1,
         pad: int = 0, group: int = 1) -> Value:
    kernel = weight.data.shape[2]
    data = numeric.conv2d(x.data, weight.data, None if bias is None else bias.data,
                          stride=stride, pad=pad, group=group)
    inputs = [x, weight] if bias is None else [x, weight, bias]
    return g.node("Conv", inputs, data, name=name, kernel_shape=[kernel, kernel], strides=[stride, stride],
                  pads=[pad] * 4, dilations=[1, 1], group=group)


def batch_norm(g: GraphWriter, x: Value, gamma: Value, beta: Value, mean: Value, var: Value, *,
               name: str, eps: float = 1e-5) -> Value:
    data = numeric.batch_norm(x.data, gamma.data, beta.data, mean.data, var.data, eps)
    return g.node("BatchNormalization", [x, gamma, beta, mean, var], data, name=name, epsilon=eps,
                  momentum=0.9)


def relu(g: GraphWriter, x: Value, *, name: str) -> Value:
    return g.node("Relu", [x], np.maximum(x.data, 0), name=name)


def clip(g: GraphWriter, x: Value, low: float, high: float, *, name: str) -> Value:
    """Clip(low, high), as ReLU6 is written: bounds as attributes up to opset 10, as inputs since 11."""
    data = np.clip(x.data, low, high)
    if g.opset <= CLIP_ATTRS_UNTIL:
        return g.node("Clip", [x], data, name=name, min=low, max=high)
    bounds = [g.constant(np.float32(low), "clip_min"), g.constant(np.float32(high), "clip_max")]
    return g.node("Clip", [x, *bounds], data, name=name)


def add(g: GraphWriter, a: Value, b: Value, *, name: str) -> Value:
    return g.node("Add", [a, b], a.data + b.data, name=name)


def sub(g: GraphWriter, a: Value, b: Value, *, name: str) -> Value:
    return g.node("Sub", [a, b], a.data - b.data, name=name)


def mul(g: GraphWriter, a: Value, b: Value, *, name: str) -> Value:
    return g.node("Mul", [a, b], a.data * b.data, name=name)


def div(g: GraphWriter, a: Value, b: Value, *, name: str) -> Value:
    return g.node("Div", [a, b], a.data / b.data, name=name)


def tanh(g: GraphWriter, x: Value, *, name: str) -> Value:
    return g.node("Tanh", [x], np.tanh(x.data), name=name)


def max_pool(g: GraphWriter, x: Value, *, name: str, kernel: int, stride: int, pad: int = 0) -> Value:
    data = numeric.max_pool(x.data, kernel=kernel, stride=stride, pad=pad)
    return g.node("MaxPool", [x], data, name=name, kernel_shape=[kernel, kernel], strides=[stride, stride],
                  pads=[pad] * 4)


def global_average_pool(g: GraphWriter, x: Value, *, name: str) -> Value:
    return g.node("GlobalAveragePool", [x], x.data.mean(axis=(2, 3), keepdims=True), name=name)


def flatten(g: GraphWriter, x: Value, *, name: str) -> Value:
    return g.node("Flatten", [x], x.data.reshape(x.data.shape[0], -1), name=name, axis=1)


def gemm(g: GraphWriter, x: Value, weight: Value, bias: Value, *, name: str) -> Value:
    """Gemm with the weight stored [out, in] and transB=1, as torch writes nn.Linear on 2-D inputs."""
    return g.node("Gemm", [x, weight, bias], x.data @ weight.data.T + bias.data, name=name, transB=1)


def matmul(g: GraphWriter, a: Value, b: Value, *, name: str) -> Value:
    return g.node("MatMul", [a, b], np.matmul(a.data, b.data), name=name)


def linear(g: GraphWriter, x: Value, weight_in_out: Value, bias: Value, *, name: str) -> Value:
    """MatMul + Add with the weight stored [in, out], as exporters write nn.Linear on 3-D inputs."""
    product = matmul(g, x, weight_in_out, name=f"{name}.MatMul")
    return add(g, product, bias, name=f"{name}.Add")


def reshape(g: GraphWriter, x: Value, shape: Sequence[int], *, name: str) -> Value:
    """Reshape to a static `shape` whose axis 0 is the batch of 1 (the data keeps its own batch)."""
    if shape[0] != 1:
        raise ValueError(f"reshape {name}: axis 0 must be the batch of 1, not {shape[0]}")
    data = x.data.reshape((x.data.shape[0], *shape[1:]))
    return g.node("Reshape", [x, g.constant(np.array(shape, np.int64), "shape")], data, name=name)


def transpose(g: GraphWriter, x: Value, perm: Sequence[int], *, name: str) -> Value:
    return g.node("Transpose", [x], x.data.transpose(perm), name=name, perm=list(perm))


def unsqueeze(g: GraphWriter, x: Value, axes: Sequence[int], *, name: str) -> Value:
    """Unsqueeze with axes as an input (opset >= 13; its one user, bert-tiny, needs 17 anyway)."""
    data = np.expand_dims(x.data, tuple(axes))
    return g.node("Unsqueeze", [x, g.constant(np.array(axes, np.int64), "axes")], data, name=name)


def cast_float(g: GraphWriter, x: Value, *, name: str) -> Value:
    return g.node("Cast", [x], x.data.astype(np.float32), name=name, to=1)  # 1 = FLOAT


def gather(g: GraphWriter, table: Value, indices: Value, *, name: str, axis: int = 0) -> Value:
    data = np.take(table.data, indices.data, axis=axis)
    return g.node("Gather", [table, indices], data, name=name, axis=axis)


def softmax(g: GraphWriter, x: Value, *, name: str) -> Value:
    """Softmax over the last axis (opset >= 13 semantics; callers keep the opset there)."""
    return g.node("Softmax", [x], numeric.softmax(x.data), name=name, axis=-1)


def layer_norm(g: GraphWriter, x: Value, gamma: Value, beta: Value, *, name: str,
               eps: float = 1e-12) -> Value:
    data = numeric.layer_norm(x.data, gamma.data, beta.data, eps)
    return g.node("LayerNormalization", [x, gamma, beta], data, name=name, axis=-1, epsilon=eps)


def gelu(g: GraphWriter, x: Value, *, name: str) -> Value:
    """Exact GELU: the Gelu operator since opset 20, before it x * 0.5 * (1 + Erf(x / sqrt(2)))."""
    data = numeric.gelu(x.data)
    if g.opset >= GELU_OP_SINCE:
        return g.node("Gelu", [x], data, name=name)
    scaled = div(g, x, g.constant(np.float32(np.sqrt(2.0)), "sqrt2"), name=f"{name}.Div")
    erf = g.node("Erf", [scaled], numeric.erf(scaled.data), name=f"{name}.Erf")
    one_plus = add(g, erf, g.constant(np.float32(1.0), "one"), name=f"{name}.Add")
    gated = mul(g, x, one_plus, name=f"{name}.Mul")
    half = g.constant(np.float32(0.5), "half")
    return g.node("Mul", [gated, half], data, name=name)
