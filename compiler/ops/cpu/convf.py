"""Float32 convolution on the host: ONNX Conv (dilations 1) for a first, shallow convolution the
quantizer keeps in float.

conv2d(data float32[N, C, H, W], weight float32[K, C/group, R, S], bias float32[K] if `bias`)
    -> float32[N, K, OH, OW]

out[n, k, y, x] = bias[k] + sum_{c, ry, rx} data_pad[n, g(k)*C/group + c, y*sh + ry, x*sw + rx] *
weight[k, c, ry, rx] with g(k) = k // (K/group) and zero padding (top, left, bottom, right).
`group` is 1, C (depthwise) or any common divisor of C and K.

No fast-math: each product is rounded to float32 and the sum is taken in (c, ry, rx) order, then
the bias added; so an output is within (C/group * R * S + 1) float32 rounding steps of
sum |data * weight| + |bias| of the exact value (the tests' bound), as the graph interpreter's
BLAS sum is, in another order.

The accumulation and its three schedules ("channels", "depthwise", "rows", or "auto") are
compiler.ops.cpu.convbase's, shared with the int8 qconv2d; here the accumulator is float32 and
the epilogue adds the bias.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.convbase import ConvOp, conv_reference64
from compiler.te import expr as E
from compiler.te.tensor import Tensor, placeholder

# "auto" picks the depthwise schedule up to this output width, narrower than the int8 kernel's
# (measured on MobileNetV2's depthwise layers in float32: at width 7 "depthwise" is 1.6-2.5x
# faster; at 14 about even; from 16 on "rows" is 1.1-4x faster, unit-stride rows of 16 most).
DEPTHWISE_MAX_WIDTH = 15


@dataclass(frozen=True)
class Conv2d(ConvOp):
    """compiler.ops.cpu.convbase.ConvOp's parameters, then `bias` (a float32[K] input or none)."""

    bias: bool = False
    strategy: str = "auto"
    op: ClassVar[str] = "conv2d"
    inp_dtype: ClassVar[str] = "float32"
    acc_dtype: ClassVar[str] = "float32"
    depthwise_max_width: ClassVar[int] = DEPTHWISE_MAX_WIDTH

    def _check_params(self) -> None:
        if not isinstance(self.bias, bool | np.bool_):
            raise ValueError(f"{self.op}: bias must be a bool, not {self.bias!r}")
        object.__setattr__(self, "bias", bool(self.bias))

    def _channel_inputs(self) -> dict[str, Tensor]:
        return {"bias": placeholder((self.weight_shape[0],), "float32", "bias")} if self.bias else {}

    def _epilogue(self, ins: dict[str, Tensor], acc: E.Expr, ch: E.Expr) -> E.Expr:
        return acc + ins["bias"][ch] if self.bias else acc

    def reference(self, data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:  # type: ignore[override]
        out = conv_reference64(data, weight, self.stride_hw, self.pad_tlbr, self.group)
        if bias is not None:
            out = out + bias.astype(np.float64)[:, None, None]
        return out.astype(np.float32)
