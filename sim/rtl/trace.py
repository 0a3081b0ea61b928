"""The `rtl` backend's activity trace: harness.cpp's per-cycle event bits -> `sim.trace.Activity`.

The harness (only when asked) records, for every cycle, which hardware counters advanced --
each counter adds its module's own event signal (busy, stall, instruction start, micro-op) --
and which memory handshakes happened, run-length encoded.  Here the bits become busy intervals
per module, labelled with the instruction that ran (each module starts its instructions in
program order), DRAM read/write activity, and token-queue occupancies: a pop when an
instruction starts, a push when it retires (GEMM/ALU: the cycle after their last micro-op's
write, as the hardware sends them).
"""

from __future__ import annotations

import numpy as np

from hw import isa
from sim.trace import Activity, Interval, insn_label, runs, split_at_starts, token_steps

# harness.cpp's TraceBit order.
BITS = ("load_busy", "load_stall", "compute_busy", "compute_stall", "store_busy", "store_stall",
        "gemm_busy", "load_insn", "compute_insn", "store_insn", "gemm_uop", "alu_uop", "ar", "r",
        "r_last", "aw", "w", "w_last")  # fmt: skip
# The harness pulses `start` in its cycle 0; the counters count from cycle 2 (see top.py).
FIRST_COUNTED_CYCLE = 2
_MODULES = ("load", "compute", "store")


def expand(rle: np.ndarray, cycles: int) -> dict[str, np.ndarray]:
    """Per-cycle boolean arrays of each bit, over the counted cycles [0, cycles)."""
    pairs = rle.reshape(-1, 2).astype(np.int64)
    starts = pairs[:, 0] - FIRST_COUNTED_CYCLE
    ends = np.append(starts[1:], max(cycles, int(starts[-1]) + 1) if len(starts) else cycles)
    masks = np.zeros(cycles, dtype=np.uint64)
    for a, b, m in zip(starts, ends, pairs[:, 1], strict=True):
        lo, hi = max(int(a), 0), min(int(b), cycles)
        if lo < hi:
            masks[lo:hi] = m
    return {name: (masks >> np.uint64(i)) & np.uint64(1) != 0 for i, name in enumerate(BITS)}


def activity(rle: np.ndarray, cycles: int, insns: list[isa.Insn]) -> Activity:
    bits = expand(rle, cycles)
    act = Activity("rtl", cycles)
    per_module: dict[str, list[tuple[int, isa.Insn]]] = {m: [] for m in _MODULES}
    for index, insn in enumerate(insns):
        per_module[isa.module_of(insn).name.lower()].append((index, insn))
    starts = {m: np.flatnonzero(bits[f"{m}_insn"]).tolist() for m in _MODULES}
    for m in _MODULES:
        labels = [_label(i, insn) for i, insn in per_module[m]]
        act.tracks[m] = split_at_starts(runs(bits[f"{m}_busy"]), starts[m], labels)
    compute_labels = [_label(i, insn) for i, insn in per_module["compute"]]
    act.tracks["gemm"] = split_at_starts(runs(bits["gemm_busy"]), starts["compute"], compute_labels)
    act.tracks["dram read"] = [Interval(a, b, "read") for a, b in runs(bits["r"])]
    act.tracks["dram write"] = [Interval(a, b, "write") for a, b in runs(bits["w"])]
    act.tokens = token_steps(_token_changes(bits, per_module, starts))
    return act


def _label(index: int, insn: isa.Insn) -> str:
    if isinstance(insn, isa.MemInsn):
        return insn_label(index, insn.opcode, insn.memory_type, insn.x_size)
    return insn_label(index, insn.opcode, reset=bool(getattr(insn, "reset", False)))


def _token_changes(bits: dict[str, np.ndarray], per_module: dict[str, list[tuple[int, isa.Insn]]],
                   starts: dict[str, list[int]]) -> dict[str, list[tuple[int, int]]]:  # fmt: skip
    changes: dict[str, list[tuple[int, int]]] = {}
    uop_done = np.flatnonzero(bits["gemm_uop"] | bits["alu_uop"])
    uops_seen = 0
    for m in _MODULES:
        busy = bits[f"{m}_busy"]
        for k, (_, insn) in enumerate(per_module[m]):
            if k >= len(starts[m]):
                break
            s = starts[m][k]
            pops, pushes = isa.token_queues(insn)
            for q in pops:
                changes.setdefault(q.short, []).append((s + 1, -1))
            n = insn.uop_iterations if isinstance(insn, isa.Gemm | isa.Alu) else 0
            if n and isinstance(insn, isa.Gemm) and insn.reset:  # not counted as micro-ops
                at = s + n + 5  # issued s+1..s+n, last write at s+n+3, pushed at s+n+4
            elif n:
                uops_seen += n
                at = int(uop_done[uops_seen - 1]) + 2 if uops_seen <= len(uop_done) else s + n + 5
            else:
                nxt = starts[m][k + 1] if k + 1 < len(starts[m]) else len(busy)
                idle = np.flatnonzero(~busy[s:nxt])
                # retire + 1: the last busy cycle before an idle one, or the next start
                at = s + int(idle[0]) if idle.size else nxt + 1
            for q in pushes:
                changes.setdefault(q.short, []).append((at, +1))
    return changes
