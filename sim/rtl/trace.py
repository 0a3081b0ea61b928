"""The `rtl` backend's activity trace: harness.cpp's per-cycle event bits -> `sim.trace.Activity`.

The harness (only when asked) records, for every cycle, which hardware counters advanced --
each counter adds its module's own event signal (busy, stall, instruction start, micro-op) --
and which memory handshakes happened, run-length encoded, plus every read request.  Here the
bits become busy intervals per module, labelled with the instruction that ran (each module
starts its instructions in program order), DRAM read/write activity, the read beats of each DMA
(reads return in request order; a request belongs to fetch when it reads the instructions,
else to the LOAD running on the load or compute module whose window holds its address), and
token-queue occupancies: a pop when an instruction starts, a push when it retires (GEMM/ALU: the
cycle after their last micro-op's write, as the hardware sends them).  The counters have no port,
so occupancies are inferred: a retirement is the last busy cycle before an idle one, or, when
the module stays busy, the next instruction's start -- or the cycle before it when the next
instruction stalled there for a token (a push may be a cycle late when it waited for fetch).
"""

from __future__ import annotations

import bisect

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program
from sim.trace import DMA_TRACKS, Activity, Interval, insn_label, runs, split_at_starts, token_steps

# harness.cpp's TraceBit order.
BITS = ("load_busy", "load_stall", "compute_busy", "compute_stall", "store_busy", "store_stall",
        "gemm_busy", "load_insn", "compute_insn", "store_insn", "gemm_uop", "alu_uop", "ar", "r",
        "r_last", "aw", "w", "w_last")
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


def activity(rle: np.ndarray, reads: np.ndarray, cycles: int, program: Program,
             cfg: AcceleratorConfig) -> Activity:
    """The Activity of a run from its bits (`rle`) and read requests (`reads`, flat
    (cycle, address, len) triples)."""
    insns = program.decoded(cfg)
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
    _dma_tracks(act, bits["r"], reads, program, cfg, per_module, starts)
    act.tokens = token_steps(_token_changes(bits, per_module, starts))
    return act


_CLIENT = {isa.MemType.INP: 1, isa.MemType.WGT: 2, isa.MemType.UOP: 3, isa.MemType.ACC: 4,
           isa.MemType.ACC_8BIT: 4}


def _dma_tracks(act: Activity, beats: np.ndarray, reads: np.ndarray, program: Program,
                cfg: AcceleratorConfig, per_module: dict[str, list[tuple[int, isa.Insn]]],
                starts: dict[str, list[int]]) -> None:
    """Each read burst's beats (in request order) on the track of the DMA that asked for it."""
    beat_cycles = np.flatnonzero(beats)
    masks = np.zeros((len(DMA_TRACKS), max(act.cycles, 1)), dtype=bool)
    first = 0
    insns = program.insn_region
    for cycle, addr, length in reads.reshape(-1, 3).astype(np.int64).tolist():
        count = length + 1
        client: int | None = 0  # fetch reads the instructions
        if not insns.offset <= addr < insns.offset + insns.nbytes:
            client = _owner(cycle - FIRST_COUNTED_CYCLE, addr, cfg, per_module, starts)
        if client is not None:
            masks[client, beat_cycles[first : first + count]] = True
        first += count
    for client, track in enumerate(DMA_TRACKS):
        act.tracks[track] = [Interval(a, b, "read") for a, b in runs(masks[client])]


def _owner(cycle: int, addr: int, cfg: AcceleratorConfig, per_module: dict[str, list[tuple[int, isa.Insn]]],
           starts: dict[str, list[int]]) -> int | None:
    """The read client whose running LOAD reads the bus word at `addr` at `cycle`."""
    for module in ("load", "compute"):
        k = bisect.bisect_right(starts[module], cycle) - 1
        if k < 0:
            continue
        insn = per_module[module][k][1]
        if isinstance(insn, isa.Load) and insn.x_size and _reads_word(insn, addr, cfg):
            return _CLIENT.get(insn.memory_type)
    return None


def _reads_word(insn: isa.Load, addr: int, cfg: AcceleratorConfig) -> bool:
    """Whether one of the rows of `insn` covers the bus word at byte `addr`."""
    eb, bus, word = cfg.elem_bytes(insn.memory_type), cfg.bus_bytes, addr // cfg.bus_bytes
    guess = ((word * bus) // eb - insn.dram_base) // insn.x_stride if insn.x_stride else 0
    guess = min(max(guess, 0), insn.y_size - 1)  # the row whose elements start nearest the word
    for row in (guess - 1, guess, guess + 1):
        if 0 <= row < insn.y_size:
            start = (insn.dram_base + row * insn.x_stride) * eb
            if start // bus <= word <= (start + insn.x_size * eb - 1) // bus:
                return True
    return False


def _label(index: int, insn: isa.Insn) -> str:
    if isinstance(insn, isa.MemInsn):
        return insn_label(index, insn.opcode, insn.memory_type, insn.x_size)
    return insn_label(index, insn.opcode, reset=bool(getattr(insn, "reset", False)))


def _token_changes(bits: dict[str, np.ndarray], per_module: dict[str, list[tuple[int, isa.Insn]]],
                   starts: dict[str, list[int]]) -> dict[str, list[tuple[int, int]]]:
    changes: dict[str, list[tuple[int, int]]] = {}
    uop_done = np.flatnonzero(bits["gemm_uop"] | bits["alu_uop"])
    uops_seen = 0
    for m in _MODULES:
        busy, stall = bits[f"{m}_busy"], bits[f"{m}_stall"]
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
                # retire + 1: the last busy cycle before an idle one; else the next start,
                # or the cycle before it when the next instruction stalled there for a token
                stalled = nxt - 1 > s and bool(stall[nxt - 1])
                at = s + int(idle[0]) if idle.size else nxt if stalled else nxt + 1
            for q in pushes:
                changes.setdefault(q.short, []).append((at, +1))
    return changes
