"""Static memory planning: every activation of a graph gets an offset in one arena, and buffers
whose lifetimes do not overlap share space.

A value is live from the step that produces it (graph inputs: from the start) to the last step
that reads it (graph outputs: to the end).  Values are placed largest first, each at the lowest
offset that overlaps no already placed value live at the same time (first fit over the free
gaps); offsets are aligned.  Constants are not planned: they live in the model's weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from compiler.graph.ir import Graph

ALIGN_BYTES = 64  # a cache line: every buffer starts aligned for vector loads


@dataclass(frozen=True)
class Lifetime:
    first: int  # index of the producing step (-1: a graph input)
    last: int  # index of the last reading step (len(nodes): a graph output)
    size_bytes: int

    def overlaps(self, other: Lifetime) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class MemoryPlan:
    offsets: dict[str, int]
    lifetimes: dict[str, Lifetime]
    arena_bytes: int
    unshared_bytes: int = field(default=0)  # what separate buffers for every value would take

    def view(self, arena: np.ndarray, name: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """Value `name` as an array inside `arena` (a uint8 buffer of `arena_bytes`)."""
        start = self.offsets[name]
        count = int(np.prod(shape, dtype=np.int64))
        return arena[start : start + count * np.dtype(dtype).itemsize].view(dtype).reshape(shape)


def lifetimes(graph: Graph, skip: Iterable[str] = ()) -> dict[str, Lifetime]:
    """Lifetime of every non-constant value, in the order of `graph.nodes` (`skip`: values that
    need no buffer, such as views of another value)."""
    end = len(graph.nodes)
    first = {name: -1 for name in graph.inputs}
    last: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        for name in node.outputs:
            first[name] = i
            last.setdefault(name, i)  # an output nobody reads still needs its buffer while written
        for name in node.inputs:
            if name in first:
                last[name] = i
    for name in graph.outputs:
        last[name] = end
    skipped = set(skip)
    out = {}
    for name, start in first.items():
        if name in skipped:
            continue
        v = graph.values[name]
        size = aligned_bytes(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize)
        out[name] = Lifetime(start, last.get(name, start), size)
    return out


def plan_memory(graph: Graph, skip: Iterable[str] = ()) -> MemoryPlan:
    return place(lifetimes(graph, skip))


def place(lives: dict[str, Lifetime]) -> MemoryPlan:
    """Offsets for values with lifetimes `lives` (from `lifetimes`, or a runtime's own steps):
    largest first, each at the lowest offset free of the values live at the same time."""
    placed: list[tuple[int, str]] = []  # (offset, name)
    offsets: dict[str, int] = {}
    for name in sorted(lives, key=lambda n: (-lives[n].size_bytes, lives[n].first, n)):
        life = lives[name]
        busy = sorted((o, o + lives[n].size_bytes) for o, n in placed if lives[n].overlaps(life))
        offset = 0
        for lo, hi in busy:
            if offset + life.size_bytes <= lo:
                break
            offset = max(offset, hi)
        offsets[name] = offset
        placed.append((offset, name))
    arena = max((offsets[n] + lives[n].size_bytes for n in lives), default=0)
    return MemoryPlan(offsets, lives, arena, sum(life.size_bytes for life in lives.values()))


def aligned_bytes(size: int) -> int:
    return max(ALIGN_BYTES, -(-size // ALIGN_BYTES) * ALIGN_BYTES)
