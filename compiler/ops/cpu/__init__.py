"""Host operators: what stays on the CPU, as TE + default host schedule + numpy reference, JIT-
compiled through LLVM.

    kernel = compile_host_op("max_pool2d", shape=(1, 64, 112, 112), kernel=3, stride=2, pad=1)
    out = kernel(data)              # or kernel(data, out=preallocated)

The quantizer's int8 operators (qconv2d, qgemm, qadd, qglobal_avg_pool) take their graph
attributes by the same names (see compiler.ops.cpu.qconv and qops).  The float graph's data
movement (transpose, gather, cast: compiler.ops.cpu.tensor), products (matmul, gemm:
compiler.ops.cpu.matmul), a first convolution kept in float (conv2d: compiler.ops.cpu.convf),
arithmetic (add, sub, mul, div), clip, relu and tanh run natively too.

`compile_host_op` builds each distinct (operator, parameters, opt_level) once per process; below
it, compiler.codegen.cpu caches compiled code by the kernel's LLVM IR.  `build_host` compiles a
user's own schedule the same way.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from compiler.codegen.cpu import HostKernel, compile_func
from compiler.lower.cpu import lower_host
from compiler.ops.cpu.base import HostOp
from compiler.ops.cpu.conv import Conv2dInt8
from compiler.ops.cpu.convf import Conv2d
from compiler.ops.cpu.eltwise import Add, Div, Mul, Sub
from compiler.ops.cpu.layout import Pack, Unpack
from compiler.ops.cpu.matmul import Gemm, MatMul
from compiler.ops.cpu.norm import Gelu, LayerNorm, Softmax
from compiler.ops.cpu.pool import AvgPool2d, GlobalAvgPool2d, MaxPool2d
from compiler.ops.cpu.qconv import QConv2d
from compiler.ops.cpu.qops import QAdd, QGemm, QGlobalAvgPool
from compiler.ops.cpu.quant import Dequantize, Quantize, Requantize
from compiler.ops.cpu.resample import PRelu, ResizeNearest
from compiler.ops.cpu.tensor import Cast, Gather, Transpose
from compiler.ops.cpu.unary import Clip, HardSigmoid, HardSwish, Relu, Tanh
from compiler.schedule.schedule import Schedule
from compiler.te.tensor import Tensor

HOST_OPS: dict[str, type[HostOp]] = {
    cls.op: cls
    for cls in (MaxPool2d, AvgPool2d, GlobalAvgPool2d, Softmax, LayerNorm, Gelu, Quantize,
                Dequantize, Requantize, Add, Mul, Pack, Unpack, Conv2dInt8, QConv2d, QGemm, QAdd,
                QGlobalAvgPool, Sub, Div, Transpose, Gather, Cast, MatMul, Gemm, Tanh, HardSigmoid,
                HardSwish, Conv2d, Clip, Relu, ResizeNearest, PRelu)
}

_KERNELS: dict[tuple[HostOp, int], HostKernel] = {}
_LOCK = threading.Lock()


def host_op(name: str, **params: Any) -> HostOp:
    """The host operator `name` with `params` (checked: ValueError names what is wrong)."""
    cls = HOST_OPS.get(name)
    if cls is None:
        raise ValueError(f"unknown host operator {name!r}; known: {', '.join(HOST_OPS)}")
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise ValueError(f"{name}: unknown parameters {unknown}; it takes {', '.join(fields)}")
    try:
        return cls(**params)
    except TypeError as exc:  # a required parameter is missing
        raise ValueError(f"{name}: {exc}; it takes {', '.join(fields)}") from None


def compile_host_op(name: str, opt_level: int = 3, **params: Any) -> HostKernel:
    """The compiled kernel of host operator `name`, built once per distinct parameters."""
    op = host_op(name, **params)
    with _LOCK:
        kernel = _KERNELS.get((op, opt_level))
    if kernel is None:
        kernel = op.build(opt_level)
        with _LOCK:
            kernel = _KERNELS.setdefault((op, opt_level), kernel)
    return kernel


def build_host(sched: Schedule, name: str = "main", inputs: Sequence[Tensor] | None = None,
               opt_level: int = 3) -> HostKernel:
    """A user's schedule compiled for the host (inputs in the order of `inputs`, outputs in the
    order the schedule was made with)."""
    return compile_func(lower_host(sched, name, inputs), opt_level)


__all__ = ["HOST_OPS", "Add", "AvgPool2d", "Cast", "Clip", "Conv2d", "Conv2dInt8", "Dequantize", "Div",
           "Gather", "Gelu", "Gemm", "GlobalAvgPool2d", "HardSigmoid", "HardSwish", "HostKernel", "HostOp",
           "LayerNorm", "MatMul", "MaxPool2d", "Mul", "PRelu", "Pack", "QAdd", "QConv2d", "QGemm",
           "QGlobalAvgPool", "Quantize", "Relu", "Requantize", "ResizeNearest", "Softmax", "Sub", "Tanh",
           "Transpose", "Unpack", "build_host", "compile_host_op", "host_op"]
