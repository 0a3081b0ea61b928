"""Per-module activity traces of a run, and their Chrome/Perfetto trace-event JSON.

Both cycle-level backends record the same `Activity`: busy intervals per track -- one per
module (load, compute, store and the GEMM core), one per read DMA (the beats each of fetch, the
inp, wgt, uop and acc loads receives) and one per memory channel (DRAM read beats, DRAM write
beats, which are the store DMA's) -- and the occupancy of the four token queues over time.
`timing` records it from its event model; `rtl` from the hardware's own busy signals
(sim/rtl/trace.py).  Time is in cycles from the first cycle the hardware counts (`Stats.cycles`
covers [0, cycles)).

`to_chrome()` writes one process with a thread (track) per module and channel, each busy
interval a complete ("X") event, and the token queues as counter ("C") events.  `ts`/`dur` are
microseconds in that format; we write cycle / 1000, so the UI's "ns" read as cycles.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MODULE_TRACKS = ("load", "compute", "store", "gemm")
# The read clients of the memory master, in top.py's order (the client numbers).
DMA_TRACKS = ("fetch dma", "inp dma", "wgt dma", "uop dma", "acc dma")
CHANNEL_TRACKS = ("dram read", "dram write")
TRACKS = MODULE_TRACKS + DMA_TRACKS + CHANNEL_TRACKS
QUEUES = ("l2c", "c2l", "c2s", "s2c")


@dataclass(frozen=True)
class Interval:
    """Busy from cycle `start` up to (not including) `end`; `label` names what ran."""

    start: int
    end: int
    label: str = ""

    @property
    def cycles(self) -> int:
        return self.end - self.start


@dataclass
class Activity:
    """What each module and channel did when, and the token-queue occupancies."""

    backend: str
    cycles: int
    tracks: dict[str, list[Interval]] = field(default_factory=lambda: {t: [] for t in TRACKS})
    # queue -> [(cycle, count)]: the count from that cycle on.
    tokens: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: {q: [] for q in QUEUES})

    def busy_cycles(self, track: str) -> int:
        """Cycles covered by the track's intervals (they never overlap)."""
        return sum(i.cycles for i in self.tracks[track])

    def to_chrome(self) -> dict[str, Any]:
        pid = 1
        events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
             "args": {"name": f"accelerator ({self.backend})"}},
        ]
        for tid, track in enumerate(TRACKS, start=1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": track}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
            for i in self.tracks[track]:
                events.append({"ph": "X", "name": i.label or track, "pid": pid, "tid": tid,
                               "ts": i.start / 1000, "dur": i.cycles / 1000})
        for queue in QUEUES:
            for cycle, count in self.tokens[queue]:
                events.append({"ph": "C", "name": f"tokens {queue}", "pid": pid,
                               "ts": cycle / 1000, "args": {"tokens": count}})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"backend": self.backend, "cycles": self.cycles,
                              "time_unit": "1 ns in the UI = 1 cycle"}}

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_chrome()) + "\n")


def runs(mask: Any, offset: int = 0) -> list[tuple[int, int]]:
    """[start, end) of every run of True in a boolean array, shifted by `offset`."""
    padded = np.concatenate(([False], np.asarray(mask, dtype=bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a) + offset, int(b) + offset) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def token_steps(changes: dict[str, list[tuple[int, int]]]) -> dict[str, list[tuple[int, int]]]:
    """Per queue, (cycle, +1/-1) events -> (cycle, count) steps, starting at (0, 0)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for queue in QUEUES:
        count, steps = 0, [(0, 0)]
        by_cycle: dict[int, int] = {}
        for cycle, delta in changes.get(queue, []):
            by_cycle[cycle] = by_cycle.get(cycle, 0) + delta
        for cycle in sorted(by_cycle):
            if by_cycle[cycle]:
                count += by_cycle[cycle]
                steps.append((cycle, count))
        out[queue] = steps
    return out


_MEM_NAMES = ("UOP", "WGT", "INP", "ACC", "OUT", "ACC_8BIT")


def insn_label(index: int, opcode: int, memory_type: int = 0, x_size: int = 1,
               reset: bool = False) -> str:
    """A short name for instruction `index`: '#12 LOAD WGT', '#5 GEMM reset', '#7 NOP'."""
    name = ("LOAD", "STORE", "GEMM", "FINISH", "ALU")[opcode] if opcode < 5 else f"op{opcode}"
    if opcode in (0, 1):
        if x_size == 0:
            return f"#{index} NOP"
        kind = _MEM_NAMES[memory_type] if memory_type < len(_MEM_NAMES) else str(memory_type)
        return f"#{index} {name} {kind}"
    return f"#{index} {name}{' reset' if opcode == 2 and reset else ''}"


def split_at_starts(busy: list[tuple[int, int]], starts: list[int],
                    labels: list[str]) -> list[Interval]:
    """Busy runs cut at each instruction start, each piece labelled with the instruction that
    started last at or before it."""
    out = []
    for a, b in busy:
        k = bisect.bisect_right(starts, a) - 1
        cut = a
        while cut < b:
            end = min(b, starts[k + 1]) if k + 1 < len(starts) else b
            out.append(Interval(cut, end, labels[k] if 0 <= k < len(labels) else ""))
            cut = end
            k += 1
    return out
