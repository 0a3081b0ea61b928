"""compile_host_op: one kernel per distinct parameters, clear errors for unknown names."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import te
from compiler.ops.cpu import HOST_OPS, build_host, compile_host_op, host_op
from compiler.schedule import Schedule


def test_every_operator_of_issue_8_is_registered():
    assert set(HOST_OPS) == {
        "max_pool2d", "avg_pool2d", "global_avg_pool2d", "softmax", "layer_norm", "gelu", "quantize",
        "dequantize", "requantize", "add", "mul", "pack", "unpack", "conv2d_int8", "qconv2d", "qgemm",
        "qadd", "qglobal_avg_pool", "sub", "div", "transpose", "gather", "cast", "matmul", "gemm",
        "tanh", "hard_sigmoid", "hard_swish", "conv2d", "clip", "relu", "resize_nearest", "prelu"}


def test_repeated_parameters_give_the_same_kernel():
    a = compile_host_op("max_pool2d", shape=(1, 2, 6, 6), kernel=3, stride=2, pad=1)
    b = compile_host_op("max_pool2d", shape=[1, 2, 6, 6], kernel=(3, 3), stride=(2, 2), pad=1)
    assert a is b
    c = compile_host_op("max_pool2d", shape=(1, 2, 6, 6), kernel=3, stride=2, pad=0)
    assert c is not a
    x = np.arange(72, dtype=np.float32).reshape(1, 2, 6, 6)
    op = host_op("max_pool2d", shape=(1, 2, 6, 6), kernel=3, stride=2, pad=1)
    assert np.array_equal(a(x), op.reference(x))


def test_registry_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown host operator 'maxpool'; known: max_pool2d, "):
        compile_host_op("maxpool", shape=(1,))
    with pytest.raises(ValueError, match=r"softmax: unknown parameters \['axis'\]; it takes shape"):
        compile_host_op("softmax", shape=(4,), axis=0)
    with pytest.raises(ValueError, match="quantize: .*missing 1 required positional argument: 'scale'"):
        compile_host_op("quantize", shape=(4,))


def test_build_host_compiles_a_users_schedule():
    a = te.placeholder((3, 5), "float32", "a")
    b = te.placeholder((5,), "float32", "b")
    out = te.compute((3, 5), lambda i, j: te.sqrt(te.fabs(a[i, j])) * b[j], "out")
    kernel = build_host(Schedule(out), "user", [a, b])
    x, y = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    assert np.array_equal(kernel(x, y[0]), np.sqrt(np.abs(x)) * y[0])
