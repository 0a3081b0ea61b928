"""Pooling on the GPU, one thread per output element, the window reduced in a register.

- `MaxPool2d(shape, kernel, stride, pad)`: NCHW max over the window, padding never chosen (it
  reads as -inf);
- `GlobalAvgPool2d(shape)`: NCHW mean over H x W, kept as [N, C, 1, 1] (each element scaled by
  1/(H*W) as it is summed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.gpu.base import GpuOp, Knobs, flat_launch, flat_threads
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import GpuTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, max_reduce, placeholder, reduce_axis, sum


@dataclass(frozen=True)
class MaxPool2d(GpuOp):
    shape: tuple[int, int, int, int]
    kernel: tuple[int, int] = (2, 2)
    stride: tuple[int, int] = (2, 2)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    op: ClassVar[str] = "max_pool2d"

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        n, c, h, w = self.shape
        (r, s), (sh, sw), (pt, pl, pb, pr) = self.kernel, self.stride, self.pad
        return n, c, (h + pt + pb - r) // sh + 1, (w + pl + pr - s) // sw + 1

    def tensors(self) -> dict[str, Tensor]:
        _n, _c, h, w = self.shape
        (r, s), (sh, sw), (pt, pl, _, _) = self.kernel, self.stride, self.pad
        data = placeholder(self.shape, "float32", "data")
        ry, rx = reduce_axis(r, "ry"), reduce_axis(s, "rx")

        def window(b: E.Expr, ch: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            iy, ix = y * sh + ry.var - pt, x * sw + rx.var - pl
            inside = E.all_of(E.ge(iy, 0), E.lt(iy, h), E.ge(ix, 0), E.lt(ix, w))
            value = E.if_then_else(inside, data[b, ch, iy, ix], E.const(-math.inf, "float32"))
            return max_reduce(value, (ry, rx))

        return {"data": data, "out": compute(self.out_shape, window, "out")}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        (r, s), (sh, sw), (pt, pl, pb, pr) = self.kernel, self.stride, self.pad
        padded = np.pad(data, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-np.inf)
        _, _, oh, ow = self.out_shape
        out = np.full(self.out_shape, -np.inf, dtype=np.float32)
        for i in range(r):
            for j in range(s):
                out = np.maximum(out, padded[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw])
        return out

    def space(self, target: GpuTarget) -> list[Knobs]:
        return [Knobs(threads=t) for t in flat_threads(math.prod(self.out_shape))]

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        flat_launch(s, "out", knobs.threads)
        return s


@dataclass(frozen=True)
class GlobalAvgPool2d(GpuOp):
    shape: tuple[int, int, int, int]
    op: ClassVar[str] = "global_avg_pool2d"

    def tensors(self) -> dict[str, Tensor]:
        n, c, h, w = self.shape
        data = placeholder(self.shape, "float32", "data")
        ry, rx = reduce_axis(h, "ry"), reduce_axis(w, "rx")
        scale = E.const(1.0 / (h * w), "float32")
        out = compute((n, c, 1, 1), lambda b, ch, _y, _x: sum(data[b, ch, ry, rx] * scale, (ry, rx)),
                      "out")
        return {"data": data, "out": out}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return data.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float32)

    def space(self, target: GpuTarget) -> list[Knobs]:
        return [Knobs(threads=t) for t in flat_threads(self.shape[0] * self.shape[1])]

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        flat_launch(s, "out", knobs.threads)
        return s
