"""The quantizer's QConv on the host: grouped int8 convolution with the accelerator's
requantization, exactly.

qconv2d(data int8[N, C, H, W], weight int8[K, C/group, R, S], bias int32[K], mult int32[K]
        [, clamp_lo int32[K], clamp_hi int32[K] if precise] [, residual int8[N, K, OH, OW] if
        residual]) -> int8[N, K, OH, OW]

acc[n, k, y, x] = sum_{c, ry, rx} data_pad[n, g(k)*C/group + c, y*sh + ry, x*sw + rx] *
weight[k, c, ry, rx] with g(k) = k // (K/group) and padding (top, left, bottom, right) that reads
`pad_value` (0, or -128 for an unsigned input's zero: compiler.graph.opdefs.qops); then
t = wrap32(wrap32(acc + bias[k]) * mult[k]), rounded, shifted and clipped as compiler.ops.cpu.
qops describes; or, `precise`, the contract's precise requantization (clamped to [clamp_lo[k],
clamp_hi[k]], an exact int64 product, rounded, shifted, clipped: qops again).  With `residual`
(the quantizer's fused residual add, compiler.quant.fuse_residual; not precise), t = wrap32(t +
wrap32(residual * mult_r)) before the rounding, as compiler.graph.opdefs.qops.requantize.  `group` is 1, C
(depthwise) or any common divisor of C and K.

The accumulation and its three schedules ("channels", "depthwise", "rows", or "auto") are
compiler.ops.cpu.convbase's, shared with the float conv2d; here each int8 operand is cast to
the int32 accumulator (whose adds wrap) and the epilogue requantizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import check_int
from compiler.ops.cpu.convbase import ConvOp, conv_reference64
from compiler.ops.cpu.qops import (
    INT32_MAX,
    INT32_MIN,
    check_precise,
    check_requant,
    epilogue_expr,
    epilogue_reference,
    random_weighted_inputs,
    requant_expr,
    requant_reference,
    vector_inputs,
    wrap32,
)
from compiler.te import expr as E
from compiler.te.tensor import Tensor, placeholder

# "auto" picks the depthwise schedule up to this output width; wider rows vectorise along the row
# (measured on MobileNetV2's layers: at output width 56 "rows" is 1.3-1.7x faster, at 28 and
# below "depthwise" 1.8-10x: a short row leaves most of each vector loop to its scalar remainder).
DEPTHWISE_MAX_WIDTH = 31


@dataclass(frozen=True)
class QConv2d(ConvOp):
    """compiler.ops.cpu.convbase.ConvOp's parameters, then the requantization's (shift, clip
    bounds, precise: compiler.ops.cpu.qops)."""

    shift: int = 0
    clip_lo: int = -128
    clip_hi: int = 127
    strategy: str = "auto"
    precise: bool = False
    pad_value: int = 0
    residual: bool = False
    mult_r: int = 0
    packed: bool = False
    pixels: int = 0
    order: str = "auto"
    op: ClassVar[str] = "qconv2d"
    inp_dtype: ClassVar[str] = "int8"
    acc_dtype: ClassVar[str] = "int32"
    depthwise_max_width: ClassVar[int] = DEPTHWISE_MAX_WIDTH
    pair_reduction: ClassVar[bool] = True

    def _check_params(self) -> None:
        check_requant(self)
        check_precise(self)
        object.__setattr__(self, "pad_value", check_int(self.op, "pad_value", self.pad_value, -128, 127))
        object.__setattr__(self, "mult_r", check_int(self.op, "mult_r", self.mult_r, INT32_MIN, INT32_MAX))
        if not isinstance(self.residual, bool | np.bool_):
            raise ValueError(f"{self.op}: residual must be a bool, not {self.residual!r}")
        object.__setattr__(self, "residual", bool(self.residual))
        object.__setattr__(self, "packed", bool(self.packed))
        if self.residual and self.precise:
            raise ValueError(f"{self.op}: a fused residual takes the plain requantization, not precise")

    @property
    def pad_fill(self) -> int:
        return self.pad_value

    def _channel_inputs(self) -> dict[str, Tensor]:
        ins = vector_inputs(self.weight_shape[0], self.precise)
        if self.residual:
            ins["residual"] = placeholder(self.out_shape, "int8", "residual")
        return ins

    def _epilogue(self, ins: dict[str, Tensor], acc: E.Expr, at: tuple[E.Expr, ...]) -> E.Expr:
        if not self.residual:
            return epilogue_expr(self, ins, acc, at[1])
        t = (acc + ins["bias"][at[1]]) * ins["mult"][at[1]]
        t = t + E.cast("int32", ins["residual"][at]) * E.const(self.mult_r, "int32")
        return requant_expr(t, self.shift, self.clip_lo, self.clip_hi)

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        ins = random_weighted_inputs(seed, self.shape, self.weight_shape, self.precise)
        if self.packed:
            ins[1] = self.pack_weight(ins[1])
        if self.residual:
            rng = np.random.default_rng(seed + 1)
            ins.append(rng.integers(-128, 128, self.out_shape).astype(np.int8))
        return ins

    def reference(self, data: np.ndarray, weight: np.ndarray, *vectors: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """`vectors`: bias and mult, and clamp_lo and clamp_hi if precise, or the residual."""
        weight = self.logical_weight(weight)
        acc = wrap32(conv_reference(data, weight, self.stride_hw, self.pad_tlbr, self.group, self.pad_value))
        if self.residual:
            bias, mult, residual = (np.asarray(v, np.int64) for v in vectors)
            t = wrap32(wrap32(acc + bias[:, None, None]) * mult[:, None, None])
            t = wrap32(t + wrap32(residual * self.mult_r))
            return requant_reference(t, self.shift, self.clip_lo, self.clip_hi)
        return epilogue_reference(self, acc, vectors, axis=1)


def conv_reference(data: np.ndarray, weight: np.ndarray, strides: tuple[int, int],
                   pads: tuple[int, int, int, int], group: int,
                   pad_value: int = 0) -> np.ndarray:
    """numpy: the exact grouped convolution, NCHW x (K, C/group, R, S) -> int64 NKHW, padding
    with `pad_value`.

    Computed in float64 (BLAS), exact: each product is below 2**14 and a sum has far fewer than
    2**39 of them."""
    return conv_reference64(data, weight, strides, pads, group, pad_value).astype(np.int64)
