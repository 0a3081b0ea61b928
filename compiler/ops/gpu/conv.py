"""Float32 2-D convolution on the GPU: ONNX Conv (NCHW, dilations 1, any group), with the fused
epilogue the CPU target fuses too (bias, a residual tensor, a clip such as ReLU or ReLU6).

out[n, k, y, x] = clip(bias[k] + sum_{c, ry, rx} pad[n, g(k)*C/group + c, y*sh + ry, x*sw + rx]
                       * weight[k, c, ry, rx] + residual[n, k, y, x])

Two schedules:
- "shared" (group 1): a block computes `tile_y` output channels x `rows` output rows x
  `thread_x` output columns with `thread_y x thread_x` threads; each thread keeps
  (tile_y/thread_y) channels x `rows` rows in registers; the input channels go in steps of
  `tile_k`, the padded input window (with its halo) and the weights of a step fetched into shared
  memory by the whole block between barriers.  Zero padding is computed in the fetch.
- "direct" (any group, depthwise included): one thread per output element, threads over columns
  (threadIdx.x) and channels (threadIdx.y), the sum in a register, the inputs read from global
  memory (the L1 cache serves a depthwise window's reuse).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.convbase import conv_reference64
from compiler.ops.gpu.base import GpuOp, Knobs, cooperative_fetch, divisors, largest_divisor
from compiler.ops.gpu.matmul import clip
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import GpuTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum


@dataclass(frozen=True)
class Conv2d(GpuOp):
    """data [N, C, H, W], weight [K, C/group, R, S]; stride (sh, sw); pad (top, left, bottom,
    right)."""

    shape: tuple[int, int, int, int]
    weight_shape: tuple[int, int, int, int]
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    group: int = 1
    bias: bool = False
    residual: bool = False
    act_lo: float = -math.inf
    act_hi: float = math.inf
    op: ClassVar[str] = "conv2d"

    def __post_init__(self) -> None:
        _n, c, h, w = self.shape
        k, cg, r, s = self.weight_shape
        if c % self.group or k % self.group or cg != c // self.group:
            raise ValueError(f"{self.op}: weight {self.weight_shape} does not take {c} channels in "
                             f"{self.group} groups (data {self.shape})")
        if self.out_shape[2] < 1 or self.out_shape[3] < 1:
            raise ValueError(f"{self.op}: a {r}x{s} window does not fit the padded {h}x{w} input")

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        n, _, h, w = self.shape
        k, _, r, s = self.weight_shape
        (sh, sw), (pt, pl, pb, pr) = self.stride, self.pad
        return n, k, (h + pt + pb - r) // sh + 1, (w + pl + pr - s) // sw + 1

    def tensors(self) -> dict[str, Tensor]:
        n, c, h, w = self.shape
        k, cg, r, s = self.weight_shape
        (sh, sw), (pt, pl, pb, pr) = self.stride, self.pad
        data = placeholder(self.shape, "float32", "data")
        weight = placeholder(self.weight_shape, "float32", "weight")
        ins = {"data": data, "weight": weight}
        if self.bias:
            ins["bias"] = placeholder((k,), "float32", "bias")
        if self.residual:
            ins["residual"] = placeholder(self.out_shape, "float32", "residual")

        def padded(b: E.Expr, ch: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            inside = E.all_of(E.ge(y, pt), E.lt(y, h + pt), E.ge(x, pl), E.lt(x, w + pl))
            return E.if_then_else(inside, data[b, ch, y - pt, x - pl], E.const(0.0, "float32"))

        pad = compute((n, c, h + pt + pb, w + pl + pr), padded, "pad")
        rc, ry, rx = reduce_axis(cg, "rc"), reduce_axis(r, "ry"), reduce_axis(s, "rx")
        kg = k // self.group

        def first(kk: E.Expr) -> E.Expr:  # the first input channel of output channel kk's group
            return E.const(0) if self.group == 1 else kk * cg if kg == 1 else (kk // kg) * cg

        def window(b: E.Expr, kk: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            value = pad[b, first(kk) + rc.var, y * sh + ry.var, x * sw + rx.var] * weight[kk, rc, ry, rx]
            return sum(value, (rc, ry, rx))

        acc = compute(self.out_shape, window, "acc")

        def out(b: E.Expr, kk: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
            value: E.Expr = acc[b, kk, y, x]
            if self.bias:
                value = value + ins["bias"][kk]
            if self.residual:
                value = value + ins["residual"][b, kk, y, x]
            return clip(value, self.act_lo, self.act_hi)

        return {**ins, "out": compute(self.out_shape, out, "out")}

    def reference(self, data: np.ndarray, weight: np.ndarray, *extra: np.ndarray) -> np.ndarray:  # type: ignore[override]
        out = conv_reference64(data, weight, self.stride, self.pad, self.group).astype(np.float32)
        rest = list(extra)
        if self.bias:
            out = out + rest.pop(0)[:, None, None]
        if self.residual:
            out = out + rest.pop(0)
        return np.clip(out, np.float32(self.act_lo), np.float32(self.act_hi)).astype(np.float32)

    def flops(self) -> int:
        _, cg, r, s = self.weight_shape
        return 2 * math.prod(self.out_shape) * cg * r * s

    # -- schedules ------------------------------------------------------------------------------
    def space(self, target: GpuTarget) -> list[Knobs]:
        _, k, oh, ow = self.out_shape
        cg = self.weight_shape[1]
        points = []
        if self.group == 1:
            txs = [d for d in divisors(ow) if 4 <= d <= 32] or [ow]
            for tile_k, thread_y in ((64, 16), (32, 8), (32, 16), (16, 8), (16, 4), (8, 8), (8, 4)):
                for rows in (4, 2, 1):
                    for tx in sorted(txs, reverse=True):
                        for step in (8, 4, 2, 1):
                            if k % tile_k or oh % rows or cg % step or tile_k // thread_y > 8:
                                continue
                            points.append(Knobs(tile_y=tile_k, thread_y=thread_y, rows=rows,
                                                thread_x=tx, tile_k=step))
        points += [Knobs(threads=t, shared=False) for t in (256, 128, 64)]
        # enough blocks to occupy every SM first (at batch 1 a large tile leaves most SMs idle)
        return sorted(points, key=lambda p: self.blocks(p) < target.sm_count)

    def blocks(self, knobs: Knobs) -> int:
        """Thread blocks of the launch at `knobs`."""
        _, k, oh, ow = self.out_shape
        if knobs.shared:
            return (k // knobs.tile_y) * (oh // knobs.rows) * (ow // knobs.thread_x)
        tx = largest_divisor(ow, min(32, knobs.threads))
        return (k // largest_divisor(k, max(1, knobs.threads // tx))) * oh * (ow // tx)

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_inline("pad")
        s.set_scope("acc", "local")
        if knobs.shared:
            return self._shared(s, knobs)
        return self._direct(s, knobs)

    def _direct(self, s: Schedule, knobs: Knobs) -> Schedule:
        _, k, _, ow = self.out_shape
        n, kk, y, x = s.stage("out").leaves
        tx = largest_divisor(ow, min(32, knobs.threads))
        ty = largest_divisor(k, max(1, knobs.threads // tx))
        xo, xi = s.split("out", x, tx)
        ko, ki = s.split("out", kk, ty)
        s.reorder("out", ko, y, xo, ki, xi, n)
        for axis, tag in ((ko, "blockIdx.z"), (y, "blockIdx.y"), (xo, "blockIdx.x"),
                          (ki, "threadIdx.y"), (xi, "threadIdx.x")):
            s.bind("out", axis, tag)
        s.compute_at("acc", "out", n)
        return s

    def _shared(self, s: Schedule, knobs: Knobs) -> Schedule:
        n, kk, y, x = s.stage("out").leaves
        ko, ki = s.split("out", kk, knobs.tile_y)
        kt, kr = s.split("out", ki, knobs.tile_y // knobs.thread_y)
        yo, yi = s.split("out", y, knobs.rows)
        xo, xi = s.split("out", x, knobs.thread_x)
        s.reorder("out", ko, yo, xo, kt, xi, n, yi, kr)
        for axis, tag in ((ko, "blockIdx.z"), (yo, "blockIdx.y"), (xo, "blockIdx.x"),
                          (kt, "threadIdx.y"), (xi, "threadIdx.x")):
            s.bind("out", axis, tag)
        s.unroll("out", yi)
        s.unroll("out", kr)
        s.compute_at("acc", "out", xi)
        an, ak, ay, ax, rc, ry, rx = s.stage("acc").leaves
        rco, rci = s.split("acc", rc, knobs.tile_k)
        s.reorder("acc", rco, ry, rx, rci, an, ak, ay, ax)
        for axis in (ak, ay):
            s.unroll("acc", axis)
        batch, (r, w) = self.shape[0], self.weight_shape[2:]
        (sh, sw) = self.stride
        window = (batch, knobs.tile_k, (knobs.rows - 1) * sh + r, (knobs.thread_x - 1) * sw + w)
        tiles: tuple[tuple[str, tuple[int, ...]], ...] = (
            ("pad", window), ("weight", (knobs.tile_y, knobs.tile_k, r, w)))
        for src, tile in tiles:
            cache = s.cache_read(src, "shared", ["acc"])
            s.compute_at(cache, "acc", rco)
            cooperative_fetch(s, cache, tile, knobs.thread_y, knobs.thread_x)
        return s
