"""Matrix products on the GPU: ONNX MatMul (batched, numpy's broadcasting of a 2-d right side)
and the frontend's Gemm (`data[M, K] @ weight[N, K].T + bias[N]`).

out[b, i, j] = sum_k a[b, i, k] * w(b, k, j) (+ bias[j]) (+ residual[b, i, j]), then GELU (erf
form) where `gelu`, then an optional clip (`act_lo`, `act_hi`: ReLU is 0, inf); `transpose_b`
reads the weight as [N, K].

The schedule is TVM's shared-memory GEMM: a block computes a `tile_y x tile_x` tile of the
output with `thread_y x thread_x` threads, each thread a (tile_y/thread_y) x (tile_x/thread_x)
register tile (a local accumulator, unrolled); the reduction goes in steps of `tile_k`, the
block fetching a's and w's step tiles into shared memory together (vectorised where `vector`)
between barriers.  The batch is blockIdx.z.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.norm import gelu_expr
from compiler.ops.gpu.base import GpuOp, Knobs, cooperative_fetch, flat_threads, grid_launch, largest_divisor
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import GpuTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum


@dataclass(frozen=True)
class MatMul(GpuOp):
    """`batch` x (m x k) @ (k x n); `b_batched`: the right side has the batch too;
    `transpose_b`: it is stored [.., n, k] (Gemm's weight)."""

    batch: int
    m: int
    n: int
    k: int
    b_batched: bool = False
    transpose_b: bool = False
    bias: bool = False
    residual: bool = False
    gelu: bool = False
    act_lo: float = -math.inf
    act_hi: float = math.inf
    op: ClassVar[str] = "matmul"

    def __post_init__(self) -> None:
        for name in ("batch", "m", "n", "k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{self.op}: {name} must be a positive int, not {value!r}")

    def tensors(self) -> dict[str, Tensor]:
        a = placeholder((self.batch, self.m, self.k), "float32", "a")
        wshape = (self.n, self.k) if self.transpose_b else (self.k, self.n)
        w = placeholder(((self.batch,) if self.b_batched else ()) + wshape, "float32", "w")
        ins = {"a": a, "w": w}
        if self.bias:
            ins["bias"] = placeholder((self.n,), "float32", "bias")
        if self.residual:
            ins["residual"] = placeholder((self.batch, self.m, self.n), "float32", "residual")
        r = reduce_axis(self.k, "r")

        def wload(b: E.Expr, kk: E.Expr, j: E.Expr) -> E.Expr:
            idx = (j, kk) if self.transpose_b else (kk, j)
            return w[((b,) if self.b_batched else ()) + idx]

        acc = compute((self.batch, self.m, self.n), lambda b, i, j: sum(a[b, i, r] * wload(b, r.var, j), r),
                      "acc")
        return {**ins, "out": compute(acc.shape, lambda b, i, j: self._epilogue(ins, acc, b, i, j), "out")}

    def _epilogue(self, ins: dict[str, Tensor], acc: Tensor, b: E.Expr, i: E.Expr, j: E.Expr) -> E.Expr:
        value: E.Expr = acc[b, i, j]
        if self.bias:
            value = value + ins["bias"][j]
        if self.residual:
            value = value + ins["residual"][b, i, j]
        if self.gelu:
            value = gelu_expr(value)
        return clip(value, self.act_lo, self.act_hi)

    def reference(self, a: np.ndarray, w: np.ndarray, *extra: np.ndarray) -> np.ndarray:  # type: ignore[override]
        wm = np.swapaxes(w, -1, -2) if self.transpose_b else w
        out = (a.astype(np.float64) @ wm.astype(np.float64)).astype(np.float32)
        rest = list(extra)
        if self.bias:
            out = out + rest.pop(0)
        if self.residual:
            out = out + rest.pop(0)
        if self.gelu:
            x = out.astype(np.float64)
            out = (0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))).astype(np.float32)
        return np.clip(out, np.float32(self.act_lo), np.float32(self.act_hi)).astype(np.float32)

    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    # -- schedules ------------------------------------------------------------------------------
    def space(self, target: GpuTarget) -> list[Knobs]:
        """Shared-memory tiles, largest first, each thread 1 to 8 x 1 to 8 outputs; then the
        plain schedule (one thread per output, the reduction from global memory)."""
        points = []
        for ty, tx in ((64, 64), (32, 64), (64, 32), (32, 32), (16, 32), (16, 16), (8, 16), (8, 8)):
            if self.m % ty or self.n % tx:
                continue
            for thy, thx in ((8, 16), (16, 16), (8, 8), (4, 16), (4, 8), (16, 8)):
                if ty % thy or tx % thx or ty // thy > 8 or tx // thx > 8:
                    continue
                for tk in (16, 8, 4):
                    if self.k % tk == 0:
                        vec = 4 if tk % 4 == 0 and tx % 4 == 0 and not self.transpose_b else 1
                        points.append(Knobs(tile_y=ty, tile_x=tx, thread_y=thy, thread_x=thx,
                                            tile_k=tk, vector=vec))
        points += [Knobs(threads=t, shared=False) for t in flat_threads(self.n)]
        # enough blocks to occupy every SM first (at batch 1 a large tile leaves most SMs idle)
        return sorted(points, key=lambda p: self.blocks(p) < target.sm_count)

    def blocks(self, knobs: Knobs) -> int:
        """Thread blocks of the launch at `knobs`."""
        if knobs.shared:
            return self.batch * (self.m // knobs.tile_y) * (self.n // knobs.tile_x)
        return self.batch * self.m * (self.n // largest_divisor(self.n, knobs.threads))

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        s = Schedule(ts["out"])
        if not knobs.shared:
            return _plain(s, knobs)
        s.set_scope("acc", "local")
        b, i, j = s.stage("out").leaves
        io, ii = s.split("out", i, knobs.tile_y)
        jo, ji = s.split("out", j, knobs.tile_x)
        ty, ry = s.split("out", ii, knobs.tile_y // knobs.thread_y)
        tx, rx = s.split("out", ji, knobs.tile_x // knobs.thread_x)
        s.reorder("out", b, io, jo, ty, tx, ry, rx)
        s.bind("out", b, "blockIdx.z")
        s.bind("out", io, "blockIdx.y")
        s.bind("out", jo, "blockIdx.x")
        s.bind("out", ty, "threadIdx.y")
        s.bind("out", tx, "threadIdx.x")
        s.unroll("out", ry)
        s.unroll("out", rx)
        s.compute_at("acc", "out", tx)
        ab, ai, aj, ar = s.stage("acc").leaves
        ro, ri = s.split("acc", ar, knobs.tile_k)
        s.reorder("acc", ab, ro, ri, ai, aj)
        s.unroll("acc", ai)
        s.unroll("acc", aj)
        w_tile = (knobs.tile_x, knobs.tile_k) if self.transpose_b else (knobs.tile_k, knobs.tile_x)
        for name, tile in (("a", (knobs.tile_y, knobs.tile_k)), ("w", w_tile)):
            cache = s.cache_read(name, "shared", ["acc"])
            s.compute_at(cache, "acc", ro)
            cooperative_fetch(s, cache, tile, knobs.thread_y, knobs.thread_x, knobs.vector)
        return s


def _plain(s: Schedule, knobs: Knobs) -> Schedule:
    """One thread per output, the sum kept in a register (acc local, at the thread)."""
    s.set_scope("acc", "local")
    thread = grid_launch(s, "out", knobs.threads)
    s.compute_at("acc", "out", thread)
    return s


def clip(value: E.Expr, lo: float, hi: float) -> E.Expr:
    """`value` clipped to [lo, hi] (an infinite bound is left out)."""
    if lo != -math.inf:
        value = E.maximum(value, E.const(float(lo), "float32"))
    if hi != math.inf:
        value = E.minimum(value, E.const(float(hi), "float32"))
    return value


__all__ = ["MatMul", "clip"]
