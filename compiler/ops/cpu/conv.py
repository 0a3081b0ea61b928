"""Direct int8 convolution on the host, NCHW x OIHW -> NCHW int32 (exact accumulation), for a
first convolution whose few input channels would waste the accelerator's blocks.

out[n, k, y, x] = bias[k] + sum_{c, ry, rx} data_pad[n, c, y*s + ry, x*s + rx] * weight[k, c, ry, rx]
with symmetric zero padding; ONNX ConvInteger with zero points 0 (plus an optional bias).

The schedule vectorises across output channels: the weights are first reordered to
(C, kh, kw, K) int32, each output row is accumulated channels-last (x, k) in a stack temporary,
a few output pixels at a time, so one weight vector serves several pixels and one input value is
broadcast across 16 channels; the row is then transposed into NCHW (adding the bias).  On the
reference machine this is 2.8x faster than vectorising across output pixels, whose stride-2
loads need shuffles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import HostOp, check_int, check_shape, pair
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
        k_out = self.out_channels
        (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.pad  # type: ignore[misc]
        data = placeholder(self.shape, "int8", "data")
        weight = placeholder((k_out, c, kh, kw), "int8", "weight")
        ins = {"data": data, "weight": weight}
        if self.bias:
            ins["bias"] = placeholder((k_out,), "int32", "bias")
        src = data
        if ph or pw:
            src = compute((n, c, h + 2 * ph, w + 2 * pw), lambda b, ch, y, x: E.if_then_else(
                E.all_of(E.ge(y, ph), E.lt(y, h + ph), E.ge(x, pw), E.lt(x, w + pw)),
                data[b, ch, y - ph, x - pw], E.const(0, "int8")), "data_pad")
        wt = compute((c, kh, kw, k_out), lambda ch, ry, rx, k: E.cast("int32", weight[k, ch, ry, rx]), "wt")
        ic, ry, rx = reduce_axis(c, "ic"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
        oh, ow = self.out_hw
        acc = compute((n, oh, ow, k_out), lambda b, y, x, k: sum(
            E.cast("int32", src[b, ic, y * sh + ry, x * sw + rx]) * wt[ic, ry, rx, k],
            [ic, ry, rx]), "acc")

        def store(b: E.Expr, k: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            return acc[b, y, x, k] + ins["bias"][k] if self.bias else acc[b, y, x, k]

        return {**ins, "out": compute((n, k_out, oh, ow), store, "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.reorder("out", "y", "k", "x")
        s.compute_at("acc", "out", "y")  # one output row, channels last, in the stack
        block = next(f for f in (4, 2, 1) if self.out_hw[1] % f == 0)
        s.split("acc", "x", block)
        s.reorder("acc", "x.o", "ic", "ry", "rx", "x.i", "k")
        s.vectorize("acc", "k")
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
