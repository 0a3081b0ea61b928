"""GPU operators (float32): TE definition + numpy reference + schedule space and default, per
operator, lowered by compiler.lower.gpu and compiled by compiler.codegen.gpu.

    op = gpu_op("conv2d", shape=(1, 64, 56, 56), weight_shape=(64, 64, 3, 3), pad=(1, 1, 1, 1))
    kernel = op.lower(gpu_preset("sm_80"))        # GpuKernelIR: loop IR + launch
    ptx = to_ptx(emit_kernel(kernel), target)      # then ptxas or the CUDA driver

`SAMPLE` is the operator sample the test suite compiles to PTX and assembles for sm_80 and sm_90
(every operator, each of its schedule kinds).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from compiler.ops.gpu.base import GpuOp, Knobs
from compiler.ops.gpu.conv import Conv2d
from compiler.ops.gpu.eltwise import Eltwise, Transpose
from compiler.ops.gpu.matmul import MatMul
from compiler.ops.gpu.norm import LayerNorm, Softmax
from compiler.ops.gpu.pool import GlobalAvgPool2d, MaxPool2d

GPU_OPS: dict[str, type[GpuOp]] = {
    cls.op: cls for cls in (Conv2d, MatMul, MaxPool2d, GlobalAvgPool2d, Eltwise, Transpose, Softmax,
                            LayerNorm)
}


def gpu_op(name: str, **params: Any) -> GpuOp:
    """The GPU operator `name` with `params` (ValueError names what is wrong)."""
    cls = GPU_OPS.get(name)
    if cls is None:
        raise ValueError(f"unknown GPU operator {name!r}; known: {', '.join(GPU_OPS)}")
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise ValueError(f"{name}: unknown parameters {unknown}; it takes {', '.join(fields)}")
    return cls(**params)


SAMPLE: tuple[GpuOp, ...] = (
    Conv2d((1, 64, 56, 56), (64, 64, 3, 3), pad=(1, 1, 1, 1), bias=True, act_lo=0.0),
    Conv2d((1, 3, 224, 224), (64, 3, 7, 7), stride=(2, 2), pad=(3, 3, 3, 3), bias=True, act_lo=0.0),
    Conv2d((1, 256, 14, 14), (512, 256, 1, 1), stride=(2, 2), bias=True),
    Conv2d((1, 96, 112, 112), (96, 1, 3, 3), pad=(1, 1, 1, 1), group=96, bias=True, act_lo=0.0,
           act_hi=6.0),
    MatMul(1, 128, 128, 128, bias=True, residual=True),
    MatMul(2, 128, 128, 64, b_batched=True),
    MatMul(1, 1, 1000, 512, transpose_b=True, bias=True),
    MaxPool2d((1, 64, 112, 112), (3, 3), (2, 2), (1, 1, 1, 1)),
    GlobalAvgPool2d((1, 512, 7, 7)),
    Eltwise("add", (1, 128, 128), (128,)),
    Eltwise("gelu", (1, 128, 512)),
    Transpose((1, 128, 2, 64), (0, 2, 1, 3)),
    Softmax((1, 2, 128, 128)),
    LayerNorm((1, 128, 128), 1e-12),
)

__all__ = ["GPU_OPS", "SAMPLE", "Conv2d", "Eltwise", "GlobalAvgPool2d", "GpuOp", "Knobs", "LayerNorm",
           "MatMul", "MaxPool2d", "Softmax", "Transpose", "gpu_op"]
