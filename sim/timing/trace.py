"""The timing model's trace records (model.h's `Tracer`) -> `sim.trace.Activity`."""

from __future__ import annotations

import numpy as np

from sim.timing.decode import Columns
from sim.trace import DMA_TRACKS, QUEUES, Activity, Interval, insn_label, runs, token_steps

_BUSY, _GEMM, _READ, _WRITE, _TOKEN = range(5)
_MODULES = ("load", "compute", "store")


def activity(raw: np.ndarray, cycles: int, cols: Columns) -> Activity:
    rec = raw.reshape(-1, 4)
    kind, a, b, c = rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3]
    act = Activity("timing", cycles)
    labels: dict[int, str] = {}

    def label(index: int) -> str:
        if index not in labels:
            labels[index] = insn_label(index, int(cols["opcode"][index]),
                                       int(cols["memory_type"][index]), int(cols["x_size"][index]),
                                       bool(cols["reset"][index]))
        return labels[index]

    for sel, track_of in ((kind == _BUSY, lambda who: _MODULES[who]), (kind == _GEMM, lambda who: "gemm")):
        for lo, hi, tag in zip(a[sel].tolist(), b[sel].tolist(), c[sel].tolist(), strict=True):
            if hi > lo:
                act.tracks[track_of(tag >> 32)].append(Interval(lo, hi, label(tag & 0xFFFFFFFF)))
    reads = kind == _READ
    channels = [("dram read", "read", reads), ("dram write", "write", kind == _WRITE)]
    channels += [(track, "read", reads & (c == k)) for k, track in enumerate(DMA_TRACKS)]
    for track, name, sel in channels:
        beats = np.zeros(max(cycles, 1), dtype=bool)
        for lo, hi in zip(a[sel].tolist(), b[sel].tolist(), strict=True):
            beats[lo:hi] = True
        act.tracks[track] = [Interval(lo, hi, name) for lo, hi in runs(beats)]
    changes: dict[str, list[tuple[int, int]]] = {q: [] for q in QUEUES}
    sel = kind == _TOKEN
    for at_cycle, q, delta in zip(a[sel].tolist(), b[sel].tolist(), c[sel].tolist(), strict=True):
        changes[QUEUES[q]].append((at_cycle, delta))
    act.tokens = token_steps(changes)
    return act
