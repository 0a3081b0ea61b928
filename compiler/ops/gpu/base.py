"""What every GPU operator shares: parameters as a frozen dataclass, a TE definition, a numpy
reference, a schedule space of typed knobs with a default point, and `lower` / `compile`.

A GPU operator is a frozen dataclass of its shapes and parameters.  `tensors()` returns the
input placeholders in argument order followed by "out"; `space(target)` the schedule points
(`Knobs`) the tuner searches, each a legal schedule or one that raises ScheduleError with its
reason; `default_knobs(target)` the point used without tuning; `schedule(ts, target, knobs)` the
records.  The helpers below write the schedule idioms the operators share (a flat element-wise
launch, a cooperative fetch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.errors import ScheduleError
from compiler.lower.gpu import GpuKernelIR, lower_gpu
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import GpuTarget
from compiler.te.tensor import Tensor

FLAT_THREADS = (256, 128, 64, 32)


@dataclass(frozen=True)
class Knobs:
    """One point of a GPU schedule space.  Products: `tile_*` is the block's tile of the output
    rows (y) and columns (x), `thread_*` its threads along them (the rest is each thread's
    register tile), `tile_k` the reduction step staged in shared memory, `vector` the lanes of
    a global access (1: scalar).  Element-wise operators use `threads` and `vector` only."""

    threads: int = 256
    vector: int = 1
    tile_y: int = 1
    tile_x: int = 1
    thread_y: int = 1
    thread_x: int = 1
    tile_k: int = 1
    rows: int = 1  # convolutions: output rows of a block (each thread computes all of them)
    shared: bool = True

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


class GpuOp:
    """Base of the GPU operators (subclasses are frozen dataclasses)."""

    op: ClassVar[str] = ""

    def tensors(self) -> dict[str, Tensor]:
        raise NotImplementedError

    def reference(self, *inputs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def space(self, target: GpuTarget) -> list[Knobs]:
        raise NotImplementedError

    def schedule(self, ts: dict[str, Tensor], target: GpuTarget, knobs: Knobs) -> Schedule:
        raise NotImplementedError

    def flops(self) -> int:
        """Floating-point operations of one run (a multiply-add counts two)."""
        return int(np.prod(self.tensors()["out"].shape))

    def default_knobs(self, target: GpuTarget) -> Knobs:
        """The first point of the space that lowers (the space lists the preferred ones first)."""
        for knobs in self.space(target):
            try:
                self.lower(target, knobs)
            except ScheduleError:
                continue
            return knobs
        raise ScheduleError(f"{self.op}: no point of its schedule space fits {target.arch}")

    def input_tensors(self, ts: dict[str, Tensor] | None = None) -> list[Tensor]:
        ts = self.tensors() if ts is None else ts
        return [t for k, t in ts.items() if k != "out"]

    def lower(self, target: GpuTarget, knobs: Knobs | None = None) -> GpuKernelIR:
        knobs = self.default_knobs(target) if knobs is None else knobs
        ts = self.tensors()
        return lower_gpu(self.schedule(ts, target, knobs), target, self.op, self.input_tensors(ts))

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(t.shape).astype(np.float32) for t in self.input_tensors()]


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in divisors(n) if d <= at_most)


def flat_launch(s: Schedule, stage: str, threads: int, vector: int = 1) -> None:
    """One thread per output element (per `vector` contiguous elements): the axes fused, split
    into blocks of `threads`, the lanes (split off the last axis first) vectorised."""
    st = s.stage(stage)
    axes = [a for a in st.leaves if a not in st.reduce_names]
    reduce_axes = [a for a in st.leaves if a in st.reduce_names]
    if vector > 1:
        last, lanes = s.split(stage, axes[-1], vector)
        axes = [*axes[:-1], last]
        s.reorder(stage, *axes, *reduce_axes, lanes)
        s.vectorize(stage, lanes)
    fused = axes[0]
    for a in axes[1:]:
        fused = s.fuse(stage, fused, a)
    total = math.prod(s_extent(s, stage, a) for a in [*axes])
    if total % threads:
        raise ScheduleError(f"{stage}: {total} elements (of {vector} lanes) do not split into blocks "
                            f"of {threads} threads")
    block, thread = s.split(stage, fused, threads)
    s.bind(stage, block, "blockIdx.x")
    s.bind(stage, thread, "threadIdx.x")


def grid_launch(s: Schedule, stage: str, threads: int) -> str:
    """The spatial axes of `stage` over the grid without fusing them (so stages computed at the
    thread keep affine indices): the last split into blocks of up to `threads` threads
    (blockIdx.x, threadIdx.x), the two before it on blockIdx.y and blockIdx.z.  Returns the
    thread axis."""
    st = s.stage(stage)
    axes = [a for a in st.leaves if a not in st.reduce_names]
    if len(axes) > 3:
        raise ScheduleError(f"{stage}: {len(axes)} spatial axes; a grid launch takes at most 3")
    last = axes[-1]
    tx = largest_divisor(s_extent(s, stage, last), threads)
    block, thread = s.split(stage, last, tx)
    lead = axes[:-1]
    s.reorder(stage, *lead, block, thread)
    for axis, tag in zip(reversed(lead), ("blockIdx.y", "blockIdx.z"), strict=False):
        s.bind(stage, axis, tag)
    s.bind(stage, block, "blockIdx.x")
    s.bind(stage, thread, "threadIdx.x")
    return thread


def s_extent(s: Schedule, stage: str, axis: str) -> int:
    """The extent of an original or split axis of `stage` (splits and fuses followed)."""
    st = s.stage(stage)
    extents = {a.name: a.extent for a in (*st.axes, *st.reduce_axes)}
    for rel in st.relations:
        if rel.kind == "fuse":
            extents[rel.parent] = extents[rel.outer] * extents[rel.inner]
        elif rel.kind == "split":
            extents[rel.inner], extents[rel.outer] = rel.factor, extents[rel.parent] // rel.factor
    return extents[axis]


def flat_threads(total: int, vector: int = 1) -> list[int]:
    """Block sizes of a flat launch over `total` elements: the FLAT_THREADS that divide them,
    else the largest divisor up to 256 (a prime count runs one thread per block)."""
    lanes = total // vector if total % vector == 0 else 0
    fits = [t for t in FLAT_THREADS if lanes and lanes % t == 0]
    return fits or [largest_divisor(total, 256)]


def cooperative_fetch(s: Schedule, stage: str, tile: tuple[int, ...], thread_y: int, thread_x: int,
                      vector: int = 1) -> None:
    """The block's threads copy shared stage `stage` (its region `tile`, as bound inference will
    find it) together: its axes fused (the last axis' `vector` lanes split off first and
    vectorised), split over threadIdx.x, then threadIdx.y, by divisors of the tile's elements."""
    st = s.stage(stage)
    axes = list(st.leaves)
    lanes = None
    if vector > 1:
        last, lanes = s.split(stage, axes[-1], vector)
        axes[-1] = last
    fused = axes[0]
    for a in axes[1:]:
        fused = s.fuse(stage, fused, a)
    if lanes is not None:
        s.reorder(stage, fused, lanes)
        s.vectorize(stage, lanes)
    n = math.prod(tile) // (vector if lanes is not None else 1)
    tx = largest_divisor(n, thread_x)
    outer, inner = s.split(stage, fused, tx)
    s.bind(stage, inner, "threadIdx.x")
    if thread_y > 1 and tx == thread_x:
        ty = largest_divisor(n // tx, thread_y)
        _, mid = s.split(stage, outer, ty)
        s.bind(stage, mid, "threadIdx.y")
