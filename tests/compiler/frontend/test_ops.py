"""Every supported ONNX operator, alone or nearly so, in its attribute variants and opset forms:
the imported graph (raw and simplified) computes what onnxruntime computes on the file."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from compiler.frontend import SUPPORTED, import_onnx, supported_ops_markdown
from compiler.graph import verify
from tests.compiler.frontend.onnx_models import (
    NEWEST,
    Builder,
    assert_matches_ort,
    has_output_shapes,
    import_and_simplify,
)
from tests.compiler.frontend.test_convert_vision import NEW_OPS

Case = Callable[[Builder], onnx.ModelProto]
CASES: list[tuple[str, int, Case]] = []


def case(*opsets: int) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        for opset in opsets or (NEWEST,):
            CASES.append((fn.__name__, opset, fn))
        return fn

    return register


def _x(b: Builder, op: str, shape: list[int], **attrs: object) -> onnx.ModelProto:
    """One op applied to input x."""
    return b.model({"x": shape}, [b.op(op, ["x"], **attrs)])


# -- convolution and dense -----------------------------------------------------------------------


@case(9, NEWEST)
def conv_bias_pad(b: Builder) -> onnx.ModelProto:
    y = b.op("Conv", ["x", b.weight("w", [4, 3, 3, 3]), b.weight("b", [4])], pads=[1, 1, 1, 1])
    return b.model({"x": [2, 3, 6, 6]}, [y])


@case()
def conv_stride_dilation_asymmetric_pads(b: Builder) -> onnx.ModelProto:
    y = b.op("Conv", ["x", b.weight("w", [5, 3, 3, 2])], strides=[2, 1], dilations=[1, 2], pads=[0, 1, 2, 1])
    return b.model({"x": [1, 3, 9, 8]}, [y])


@case()
def conv_wide_stride_dilation(b: Builder) -> onnx.ModelProto:
    """16 or more input channels: the interpreter's tap-by-tap GEMM (nn._dense_conv)."""
    y = b.op("Conv", ["x", b.weight("w", [5, 16, 3, 2]), b.weight("b", [5])], strides=[2, 1],
             dilations=[1, 2], pads=[0, 1, 2, 1])
    return b.model({"x": [2, 16, 9, 8]}, [y])


@case()
def conv_wide_1d(b: Builder) -> onnx.ModelProto:
    y = b.op("Conv", ["x", b.weight("w", [3, 17, 3])], strides=[2], pads=[1, 0])
    return b.model({"x": [2, 17, 9]}, [y])


@case()
def conv_depthwise_dilated_1d(b: Builder) -> onnx.ModelProto:
    y = b.op("Conv", ["x", b.weight("w", [3, 1, 3])], group=3, dilations=[2], pads=[2, 1])
    return b.model({"x": [2, 3, 9]}, [y])


@case(13)
def conv_groups(b: Builder) -> onnx.ModelProto:
    return b.model({"x": [1, 4, 7, 7]}, [b.op("Conv", ["x", b.weight("w", [6, 2, 3, 3])], group=2)])


@case(9, NEWEST)
def conv_depthwise(b: Builder) -> onnx.ModelProto:
    y = b.op(
        "Conv", ["x", b.weight("w", [4, 1, 3, 3]), b.weight("b", [4])], group=4, strides=[2, 2], pads=[1] * 4
    )
    return b.model({"x": [1, 4, 7, 7]}, [y])


@case(9, NEWEST)
def conv_same_upper(b: Builder) -> onnx.ModelProto:
    y = b.op("Conv", ["x", b.weight("w", [2, 3, 4, 3])], auto_pad="SAME_UPPER", strides=[2, 2])
    return b.model({"x": [1, 3, 7, 8]}, [y])


@case()
def conv_same_lower_valid(b: Builder) -> onnx.ModelProto:
    y = b.op("Conv", ["x", b.weight("w", [2, 3, 4, 4])], auto_pad="SAME_LOWER", strides=[2, 3])
    z = b.op("Conv", [y, b.weight("w2", [2, 2, 2, 2])], auto_pad="VALID")
    return b.model({"x": [1, 3, 7, 8]}, [z])


@case()
def conv_1d(b: Builder) -> onnx.ModelProto:
    return b.model({"x": [2, 2, 9]}, [b.op("Conv", ["x", b.weight("w", [3, 2, 3])], strides=[2])])


@case(9, NEWEST)
def gemm_trans_alpha_beta(b: Builder) -> onnx.ModelProto:
    y = b.op("Gemm", ["x", b.weight("w", [6, 5]), b.weight("c", [1, 5])], transA=1, alpha=2.0, beta=0.5)
    return b.model({"x": [6, 3]}, [y])


@case(13)
def gemm_without_bias(b: Builder) -> onnx.ModelProto:
    return b.model({"x": [3, 6]}, [b.op("Gemm", ["x", b.weight("w", [5, 6])], transB=1)])


@case(9, NEWEST)
def matmul_batched_and_vectors(b: Builder) -> onnx.ModelProto:
    y = b.op("MatMul", ["x", b.weight("w", [4, 5])])
    v = b.op("MatMul", [b.weight("v", [3]), y])  # [3] @ [2, 3, 5] -> [2, 5]
    return b.model({"x": [2, 3, 4]}, [y, v])


# -- element-wise ---------------------------------------------------------------------------------


@case(9, NEWEST)
def arithmetic_broadcast(b: Builder) -> onnx.ModelProto:
    c = b.weight("c", [3, 1])
    s = b.op("Add", ["x", c])
    s = b.op("Sub", [s, b.weight("d", [4])])
    s = b.op("Mul", [c, s])
    s = b.op("Div", [s, b.floats(np.linspace(1, 2, 4, dtype=np.float32))])
    return b.model({"x": [2, 3, 4]}, [b.op("Pow", [b.op("Abs", [s]), b.floats(1.5)])])


@case(13)
def integer_division_truncates(b: Builder) -> onnx.ModelProto:
    q = b.op(
        "Div",
        [
            b.init("a", np.array([7, -7, 7, -7, 6], np.int64)),
            b.init("d", np.array([2, 2, -2, -2, 3], np.int64)),
        ],
    )
    return b.model({"x": [5]}, [b.op("Add", ["x", b.op("Cast", [q], to=TensorProto.FLOAT)])])


@case(9, NEWEST)
def unary_activations(b: Builder) -> onnx.ModelProto:
    outs = [b.op(op, ["x"]) for op in ("Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Abs")]
    outs.append(b.op("Sqrt", [b.op("Abs", ["x"])]))
    outs.append(b.op("LeakyRelu", ["x"], alpha=0.1))
    outs.append(b.op("HardSigmoid", ["x"]))
    outs.append(b.op("HardSigmoid", ["x"], alpha=0.3, beta=0.4))
    return b.model({"x": [2, 3, 5]}, outs)


@case(14, NEWEST)
def hard_swish(b: Builder) -> onnx.ModelProto:
    return _x(b, "HardSwish", [2, 8, 3])


@case(20, NEWEST)
def gelu_exact_and_tanh(b: Builder) -> onnx.ModelProto:
    return b.model({"x": [2, 7]}, [b.op("Gelu", ["x"]), b.op("Gelu", ["x"], approximate="tanh")])


@case(9, 11, NEWEST)
def clip_forms(b: Builder) -> onnx.ModelProto:
    outs = [b.clip("x", -0.5, 0.7)]
    if b.opset >= 11:  # only a lower bound: the max input is absent
        outs.append(b.op("Clip", ["x", b.floats(0.0)]))
        outs.append(b.op("Clip", ["x", "", b.floats(0.25)]))
    return b.model({"x": [3, 4]}, outs)


@case(9, NEWEST)
def variadic_sum_max_min(b: Builder) -> onnx.ModelProto:
    args = ["x", b.weight("a", [4]), b.weight("c", [3, 1])]
    return b.model({"x": [2, 3, 4]}, [b.op(op, args) for op in ("Sum", "Max", "Min")])


@case(9, NEWEST)
def identity_dropout_cast(b: Builder) -> onnx.ModelProto:
    y = b.dropout(b.op("Identity", ["x"]))
    i = b.op("Cast", [b.op("Mul", [y, b.floats(3.0)])], to=TensorProto.INT32)
    return b.model({"x": [2, 6]}, [b.op("Cast", [i], to=TensorProto.FLOAT)])


# -- normalisation, pooling, softmax ------------------------------------------------------------


@case(9, NEWEST)
def batch_norm(b: Builder) -> onnx.ModelProto:
    params = [
        b.weight("s", [3]),
        b.weight("t", [3]),
        b.weight("m", [3]),
        b.init("v", b.rng.uniform(0.5, 2, 3).astype(np.float32)),
    ]
    return b.model({"x": [2, 3, 4, 4]}, [b.op("BatchNormalization", ["x", *params], epsilon=1e-3)])


@case(17, NEWEST)
def layer_norm(b: Builder) -> onnx.ModelProto:
    y = b.op("LayerNormalization", ["x", b.weight("g", [6]), b.weight("h", [6])])
    z = b.op("LayerNormalization", ["x", b.weight("g2", [4, 6])], axis=1, epsilon=1e-3)
    return b.model({"x": [2, 4, 6]}, [y, z])


@case(17, NEWEST)
def layer_norm_mean_and_inv_std_dev(b: Builder) -> onnx.ModelProto:
    y = b.op("LayerNormalization", ["x", b.weight("g", [4, 6])], n_out=3, axis=1, epsilon=1e-3)
    return b.model({"x": [2, 4, 6]}, [y, f"{y}_extra1", f"{y}_extra2"])


@case(9, NEWEST)
def max_pool(b: Builder) -> onnx.ModelProto:
    return _x(b, "MaxPool", [1, 2, 7, 7], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


@case(10, NEWEST)
def max_pool_ceil_dilated(b: Builder) -> onnx.ModelProto:
    y = b.op("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    z = b.op("MaxPool", ["x"], kernel_shape=[2, 3], dilations=[2, 1], strides=[1, 2], pads=[0, 1, 1, 0])
    return b.model({"x": [1, 2, 7, 8]}, [y, z])


@case(9, NEWEST)
def average_pool_padding(b: Builder) -> onnx.ModelProto:
    kw = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    y = b.op("AveragePool", ["x"], **kw)
    z = b.op("AveragePool", ["x"], count_include_pad=1, **kw)
    return b.model({"x": [1, 2, 7, 6]}, [y, z])


@case(10, NEWEST)
def average_pool_ceil(b: Builder) -> onnx.ModelProto:
    y = b.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    z = b.op(
        "AveragePool",
        ["x"],
        kernel_shape=[3, 3],
        strides=[2, 2],
        ceil_mode=1,
        pads=[1] * 4,
        count_include_pad=1,
    )
    return b.model({"x": [1, 2, 8, 8]}, [y, z])


@case(9, NEWEST)
def global_pools(b: Builder) -> onnx.ModelProto:
    return b.model({"x": [2, 3, 5, 4]}, [b.op("GlobalAveragePool", ["x"]), b.op("GlobalMaxPool", ["x"])])


@case(9, 13, NEWEST)
def softmax_axes(b: Builder) -> onnx.ModelProto:
    # before opset 13, axis=1 on rank 3 means softmax over the flattened axes 1 and 2
    return b.model(
        {"x": [2, 3, 4]},
        [b.op("Softmax", ["x"], axis=1), b.op("Softmax", ["x"]), b.op("Softmax", ["x"], axis=-1)],
    )


# -- data movement and shapes -----------------------------------------------------------------------


@case(9, NEWEST)
def flatten_reshape_transpose(b: Builder) -> onnx.ModelProto:
    outs = [b.op("Flatten", ["x"], axis=a) for a in (0, 2, 3)]
    outs.append(b.op("Reshape", ["x", b.ints([0, -1, 2])]))
    outs.append(b.op("Transpose", ["x"]))
    outs.append(b.op("Transpose", ["x"], perm=[1, 2, 0]))
    return b.model({"x": [2, 3, 4]}, outs)


@case(11, NEWEST)
def flatten_negative_axis(b: Builder) -> onnx.ModelProto:
    return _x(b, "Flatten", [2, 3, 4], axis=-1)


@case(9, NEWEST)
def concat_gather(b: Builder) -> onnx.ModelProto:
    c = b.op("Concat", ["x", b.weight("w", [2, 3, 2])], axis=2 if b.opset < 11 else -1)
    g = b.op("Gather", [c, b.init("i", np.array([[2, 0], [1, 1]], np.int64))], axis=1)
    s = b.op("Gather", [c, b.init("j", np.array(1, np.int64))], axis=2)
    n = b.op("Gather", [c, b.init("k", np.array([-1, 0], np.int32))], axis=0) if b.opset >= 11 else s
    return b.model({"x": [2, 3, 4]}, [g, s, n])


@case(9, 13, NEWEST)
def squeeze_unsqueeze(b: Builder) -> onnx.ModelProto:
    u = b.unsqueeze("x", [0, 3])
    s = b.squeeze(u, [0] if b.opset < 11 else [-2])
    a = b.op("Squeeze", [u])  # no axes: every size-1 axis
    return b.model({"x": [2, 1, 3]}, [s, a])


@case(9, NEWEST)
def slices(b: Builder) -> onnx.ModelProto:
    y = b.slice("x", [1, -3], [1000, -1], [1, 2])
    z = b.slice("x", [0], [-1], [0])
    outs = [y, z]
    if b.opset >= 10:
        outs.append(b.slice("x", [-1, 4], [-1000, 0], [2, 1], steps=[-2, -1]))
    return b.model({"x": [3, 5, 6]}, outs)


@case(9, NEWEST)
def pads(b: Builder) -> onnx.ModelProto:
    y = b.pad("x", [0, 1, 2, 0, 2, 1], value=1.5)
    z = b.pad("x", [0, 2, 1, 0, 1, 2], mode="reflect")
    e = b.pad("x", [0, 1, 0, 0, 2, -1], mode="edge")
    return b.model({"x": [2, 4, 5]}, [y, z, e])


@case(18, NEWEST)
def pad_axes_input(b: Builder) -> onnx.ModelProto:
    return b.model(
        {"x": [2, 4, 5]}, [b.op("Pad", ["x", b.ints([1, 2, 3, 0]), b.floats(0.5), b.ints([-1, 1])])]
    )


@case(9, 15, NEWEST)
def shape_size_constant_of_shape_expand(b: Builder) -> onnx.ModelProto:
    window = {"start": -2} if b.opset >= 15 else {}
    shape = b.op("Shape", ["x"], **window)
    fill = b.op("ConstantOfShape", [shape], value=onnx.numpy_helper.from_array(np.array([2.5], np.float32)))
    size = b.op("Cast", [b.op("Size", ["x"])], to=TensorProto.FLOAT)
    y = b.op("Add", [b.op("Mul", ["x", size]), fill])
    e = b.op("Expand", [b.weight("e", [3, 1]), b.ints([2, 1, 4])]) if b.opset >= 13 else y
    head = b.op("Shape", ["x"], start=0, end=-1) if b.opset >= 15 else shape
    return b.model(
        {"x": [2, 3, 4]}, [y, e, shape, head], types={shape: TensorProto.INT64, head: TensorProto.INT64}
    )


@case(9, 13, NEWEST)
def reductions(b: Builder) -> onnx.ModelProto:
    outs = [b.reduce_mean("x", [1, -1]), b.reduce_mean("x", [0], keepdims=0)]
    outs.append(b.axes_op("ReduceSum", "x", [2], 13, keepdims=0))
    outs.append(b.axes_op("ReduceMax", "x", [-2], 18))
    outs.append(b.op("ReduceMean", ["x"], keepdims=0))  # no axes: all of them
    return b.model({"x": [2, 3, 4]}, outs)


@case(18, NEWEST)
def reduce_noop_with_empty_axes(b: Builder) -> onnx.ModelProto:
    return _x(b, "ReduceSum", [2, 3], noop_with_empty_axes=1)


# -- quantization ---------------------------------------------------------------------------------


@case(13, NEWEST)
def quantize_dequantize(b: Builder) -> onnx.ModelProto:
    q = b.op("QuantizeLinear", ["x", b.floats(0.02)])  # no zero point: uint8
    d = b.op("DequantizeLinear", [q, b.floats(0.02)])
    w = b.init("wq", b.rng.integers(-128, 128, size=(4, 3)).astype(np.int8))
    ws = b.init("ws", np.array([0.1, 0.2, 0.05, 0.3], np.float32))
    wz = b.init("wz", np.array([0, 1, -2, 3], np.int8))
    dw = b.op("DequantizeLinear", [w, ws, wz], axis=0)
    qi = b.op("QuantizeLinear", [d, b.floats(0.01), b.init("z8", np.array(-3, np.int8))])
    return b.model(
        {"x": [2, 3]}, [b.op("Gemm", [d, dw], transB=1), b.op("DequantizeLinear", [qi, b.floats(0.01), "z8"])]
    )


@pytest.mark.parametrize("name,opset,build", CASES, ids=[f"{n}-{o}" for n, o, _ in CASES])
def test_op_matches_onnxruntime(name: str, opset: int, build: Case) -> None:
    model = build(Builder(opset, seed=len(name)))
    if has_output_shapes(model):
        onnx.checker.check_model(model, full_check=True)
    raw = verify(import_onnx(model))
    assert_matches_ort(model, raw, seed=opset)
    assert_matches_ort(model, import_and_simplify(model), seed=opset + 1)


def test_every_supported_operator_has_a_case() -> None:
    used: set[str] = set()
    for _, opset, build in CASES:
        used.update(n.op_type for n in build(Builder(opset)).graph.node)
    # Constant: the converter-pattern tests; the vision operators: test_convert_vision.py
    assert set(SUPPORTED) - used - set(NEW_OPS) == {"Constant"}


def test_readme_table_lists_every_operator_once() -> None:
    rows = supported_ops_markdown().splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == sorted(SUPPORTED)
