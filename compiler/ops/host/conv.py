"""Direct int8 convolution on the host, NCHW x OIHW -> NCHW int32 (exact accumulation), for a
first convolution whose few input channels would waste the accelerator's blocks.

out[n, k, y, x] = bias[k] + sum_{c, ry, rx} data_pad[n, c, y*s + ry, x*s + rx] * weight[k, c, ry, rx]
with symmetric zero padding; ONNX ConvInteger with zero points 0 (plus an optional bias).  The
schedule keeps the output width innermost (LLVM vectorises across output pixels, sign-extending
int8 to int32), pads the input once into a heap temporary and sums into the output directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.host.base import HostOp, check_int, check_shape, pair
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum


@dataclass(frozen=True)
class Conv2dInt8(HostOp):
    """`shape` is the data's (N, C, H, W); the weight is (out_channels, C, kh, kw)."""

    shape: tuple[int, int, int, int]
    out_channels: int
    kernel: int | tuple[int, int]
    stride: int | tuple[int, int] = 1
    pad: int | tuple[int, int] = 0
    bias: bool = False
    op: ClassVar[str] = "conv2d_int8"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, rank=4))
        check_int(self.op, "out_channels", self.out_channels, 1)
        for field, low in (("kernel", 1), ("stride", 1), ("pad", 0)):
            object.__setattr__(self, field, pair(self.op, field, getattr(self, field), low))
        oh, ow = self.out_hw
        if oh < 1 or ow < 1:
            raise ValueError(f"{self.op}: kernel {self.kernel} is larger than the padded input")

    @property
    def out_hw(self) -> tuple[int, int]:
        (_, _, h, w), (kh, kw), (sh, sw), (ph, pw) = self.shape, self.kernel, self.stride, self.pad  # type: ignore[misc]
        return (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1

    def tensors(self) -> dict[str, Tensor]:
        n, c, h, w = self.shape
        (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.pad  # type: ignore[misc]
        data = placeholder(self.shape, "int8", "data")
        weight = placeholder((self.out_channels, c, kh, kw), "int8", "weight")
        ins = {"data": data, "weight": weight}
        src = data
        if ph or pw:
            src = compute((n, c, h + 2 * ph, w + 2 * pw), lambda b, ch, y, x: E.if_then_else(
                E.all_of(E.ge(y, ph), E.lt(y, h + ph), E.ge(x, pw), E.lt(x, w + pw)),
                data[b, ch, y - ph, x - pw], E.const(0, "int8")), "data_pad")  # fmt: skip
        ic, ry, rx = reduce_axis(c, "ic"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
        shape = (n, self.out_channels, *self.out_hw)
        conv = compute(shape, lambda b, k, y, x: sum(
            E.cast("int32", src[b, ic, y * sh + ry, x * sw + rx]) * E.cast("int32", weight[k, ic, ry, rx]),
            [ic, ry, rx]), "conv")  # fmt: skip
        if not self.bias:
            return {**ins, "out": conv}
        bias = ins["bias"] = placeholder((self.out_channels,), "int32", "bias")
        return {**ins, "out": compute(shape, lambda b, k, y, x: conv[b, k, y, x] + bias[k], "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.reorder("conv", "ic", "ry", "rx", "x")
        if self.bias:  # accumulate a row in the stack, add the bias while storing it
            s.compute_at("conv", "out", "y")
        return s

    def reference(self, data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:  # type: ignore[override]
        (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.pad  # type: ignore[misc]
        x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
        oh, ow = self.out_hw
        acc = np.einsum("nchwij,kcij->nkhw", win[:, :, :oh, :ow], weight.astype(np.float64), optimize=True)
        out = acc.astype(np.int64)  # exact: |sums| < 2**53
        if bias is not None:
            out = out + bias.astype(np.int64)[None, :, None, None]
        return out.astype(np.int32)  # type: ignore[no-any-return]
