"""Float32 convolution on the host: ONNX Conv (dilations 1) for a first, shallow convolution the
quantizer keeps in float.

conv2d(data float32[N, C, H, W], weight float32[K, C/group, R, S], bias float32[K] if `bias`,
       residual float32[N, K, OH, OW] if `residual`) -> float32[N, K, OH, OW]

out[n, k, y, x] = bias[k] + sum_{c, ry, rx} data_pad[n, g(k)*C/group + c, y*sh + ry, x*sw + rx] *
weight[k, c, ry, rx] with g(k) = k // (K/group) and zero padding (top, left, bottom, right).
`group` is 1, C (depthwise) or any common divisor of C and K.  The whole-model CPU target
(compiler.runtime.cpu_model) fuses a following residual Add and a Relu or Clip into the
epilogue: `residual` adds a tensor shaped like the output after the bias, and `act_lo`/`act_hi`
clip the result as compiler.ops.cpu.unary's Clip does (an infinite bound is left out), each step
rounded to float32 as the separate operators round it, so the fusion changes no bit.

No fast-math: each product is rounded to float32 and the sum is taken in (c, ry, rx) order, then
the bias added; so an output is within (C/group * R * S + 1) float32 rounding steps of
sum |data * weight| + |bias| of the exact value (the tests' bound), as the graph interpreter's
BLAS sum is, in another order.

The accumulation and its three schedules ("channels", "depthwise", "rows", or "auto") are
compiler.ops.cpu.convbase's, shared with the int8 qconv2d; here the accumulator is float32 and
the epilogue adds the bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.convbase import ConvOp, conv_reference64
from compiler.ops.cpu.unary import clip_expr
from compiler.te import expr as E
from compiler.te.tensor import Tensor, placeholder

# "auto" picks the depthwise schedule up to this output width, narrower than the int8 kernel's
# (measured on MobileNetV2's depthwise layers in float32: at width 7 "depthwise" is 1.6-2.5x
# faster; at 14 about even; from 16 on "rows" is 1.1-4x faster, unit-stride rows of 16 most).
DEPTHWISE_MAX_WIDTH = 15


@dataclass(frozen=True)
class Conv2d(ConvOp):
    """compiler.ops.cpu.convbase.ConvOp's parameters, then `bias` (a float32[K] input or none),
    the schedule's `strategy`, and the fused epilogue: `residual` (an input shaped like the
    output, added after the bias) and the clip bounds `act_lo`, `act_hi` (Relu: 0, inf)."""

    bias: bool = False
    strategy: str = "auto"
    residual: bool = False
    act_lo: float = -math.inf
    act_hi: float = math.inf
    packed: bool = False
    pixels: int = 0
    order: str = "auto"
    op: ClassVar[str] = "conv2d"
    contract: ClassVar[bool] = True
    inp_dtype: ClassVar[str] = "float32"
    acc_dtype: ClassVar[str] = "float32"
    depthwise_max_width: ClassVar[int] = DEPTHWISE_MAX_WIDTH

    def _check_params(self) -> None:
        if not isinstance(self.bias, bool | np.bool_):
            raise ValueError(f"{self.op}: bias must be a bool, not {self.bias!r}")
        object.__setattr__(self, "bias", bool(self.bias))
        if not isinstance(self.residual, bool | np.bool_):
            raise ValueError(f"{self.op}: residual must be a bool, not {self.residual!r}")
        object.__setattr__(self, "residual", bool(self.residual))
        object.__setattr__(self, "packed", bool(self.packed))
        for name in ("act_lo", "act_hi"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating) \
                    or math.isnan(value):
                raise ValueError(f"{self.op}: {name} must be a number, not {value!r}")
            with np.errstate(over="ignore"):  # beyond float32's range: infinite
                object.__setattr__(self, name, float(np.float32(value)))

    def _channel_inputs(self) -> dict[str, Tensor]:
        ins = {"bias": placeholder((self.weight_shape[0],), "float32", "bias")} if self.bias else {}
        if self.residual:
            ins["residual"] = placeholder(self.out_shape, "float32", "residual")
        return ins

    def _epilogue(self, ins: dict[str, Tensor], acc: E.Expr, at: tuple[E.Expr, ...]) -> E.Expr:
        value = acc + ins["bias"][at[1]] if self.bias else acc
        if self.residual:
            value = value + ins["residual"][at]
        return clip_expr(value, self.act_lo, self.act_hi)

    def reference(self, data: np.ndarray, weight: np.ndarray, *extra: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """`extra`: the bias if `bias`, then the residual if `residual`."""
        weight = self.logical_weight(weight)
        out = conv_reference64(data, weight, self.stride_hw, self.pad_tlbr, self.group).astype(np.float32)
        rest = list(extra)
        if self.bias:
            out = out + rest.pop(0)[:, None, None]
        if self.residual:
            out = out + rest.pop(0)
        return np.minimum(np.maximum(out, np.float32(self.act_lo)), np.float32(self.act_hi))
