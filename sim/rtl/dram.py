"""The DRAM model of harness.cpp, in Python, for the signal-level (pyverilator) simulator.

It must stay cycle-for-cycle identical to the C++ one (tests/sim/rtl/test_signal.py compares
the two); see the header of harness.cpp for the rules.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from hw.config import BURST_BOUNDARY_BYTES
from sim.backend import SimulationError

QUEUE_CAP = 256


@dataclass
class Burst:
    addr: int
    beats: int
    beat: int = 0
    ready_cycle: int = 0


@dataclass(frozen=True)
class Offer:
    """The inputs the model drives into the design for one cycle."""

    ar_ready: bool
    aw_ready: bool
    r_valid: bool
    r_data: int
    r_last: bool
    w_ready: bool


@dataclass(frozen=True)
class Request:
    """The design's memory outputs in one cycle, sampled after the inputs settled."""

    ar_valid: bool = False
    ar_addr: int = 0
    ar_len: int = 0
    r_ready: bool = False
    aw_valid: bool = False
    aw_addr: int = 0
    aw_len: int = 0
    w_valid: bool = False
    w_data: int = 0
    w_strb: int = 0
    w_last: bool = False


class DramModel:
    def __init__(self, dram: np.ndarray, *, bus_bytes: int, latency_cycles: int,
                 bytes_per_cycle: int, max_burst_beats: int) -> None:
        self.dram = dram
        self.bus_bytes = bus_bytes
        self.latency_cycles = latency_cycles
        self.bytes_per_cycle = bytes_per_cycle
        self.max_burst_beats = max_burst_beats
        self.reads: deque[Burst] = deque()
        self.writes: deque[Burst] = deque()
        self.credit = 0
        self.write_turn = False
        self.read_beats = 0
        self.write_beats = 0
        self._offer = Offer(False, False, False, 0, False, False)

    def offer(self, now: int) -> Offer:
        cap = max(self.bytes_per_cycle, self.bus_bytes)
        self.credit = min(cap, self.credit + self.bytes_per_cycle)
        beat = self.bus_bytes
        read_ready = bool(self.reads) and self.reads[0].ready_cycle <= now
        if self.writes and (self.write_turn or not read_ready):
            w_offer = self.credit >= beat
            r_offer = read_ready and self.credit >= beat * (1 + w_offer)
        else:
            r_offer = read_ready and self.credit >= beat
            w_offer = self.credit >= beat * (1 + r_offer)
        data, last = 0, False
        if r_offer:
            rd = self.reads[0]
            start = rd.addr + rd.beat * beat
            data = int.from_bytes(self.dram[start : start + beat].tobytes(), "little")
            last = rd.beat + 1 == rd.beats
        self._offer = Offer(len(self.reads) < QUEUE_CAP, len(self.writes) < QUEUE_CAP,
                            r_offer, data, last, w_offer)
        return self._offer

    def update(self, now: int, req: Request) -> None:
        """Apply the handshakes of cycle `now`; raises SimulationError as the harness reports."""
        offer, beat = self._offer, self.bus_bytes
        if offer.r_valid and req.r_ready:
            self.credit -= beat
            self.write_turn = True
            self.read_beats += 1
            self.reads[0].beat += 1
            if self.reads[0].beat == self.reads[0].beats:
                self.reads.popleft()
        if req.aw_valid and offer.aw_ready:
            self._check("write", req.aw_addr, req.aw_len, now)
            self.writes.append(Burst(req.aw_addr, req.aw_len + 1))
        if offer.w_ready and req.w_valid:
            self._write_beat(req, now)
        if req.ar_valid and offer.ar_ready:
            self._check("read", req.ar_addr, req.ar_len, now)
            self.reads.append(Burst(req.ar_addr, req.ar_len + 1, 0, now + self.latency_cycles))

    def _write_beat(self, req: Request, now: int) -> None:
        if not self.writes:
            raise SimulationError(
                f"rtl: memory protocol violation at cycle {now}: write data beat without a "
                f"preceding write address (AW)"
            )
        w, beat = self.writes[0], self.bus_bytes
        if req.w_last != (w.beat + 1 == w.beats):
            raise SimulationError(
                f"rtl: memory protocol violation at cycle {now}: w_last wrong on beat {w.beat} "
                f"of the write of {w.beats * beat} bytes at address {w.addr:#x}"
            )
        start = w.addr + w.beat * beat
        data = np.frombuffer(req.w_data.to_bytes(beat, "little"), dtype=np.uint8)
        strb = np.array([(req.w_strb >> k) & 1 for k in range(beat)], dtype=bool)
        self.dram[start : start + beat][strb] = data[strb]
        self.credit -= beat
        self.write_turn = False
        self.write_beats += 1
        w.beat += 1
        if w.beat == w.beats:
            self.writes.popleft()

    def _check(self, channel: str, addr: int, length: int, now: int) -> None:
        nbytes = (length + 1) * self.bus_bytes
        request = f"{channel} of {nbytes} bytes at address {addr:#x}"
        if addr % self.bus_bytes:
            problem = f"{request} is not aligned to the {self.bus_bytes}-byte bus"
        elif length + 1 > self.max_burst_beats:
            problem = (f"{request} has {length + 1} beats, more than max_burst_beats="
                       f"{self.max_burst_beats}")
        elif addr + nbytes > self.dram.size:
            raise SimulationError(
                f"rtl: {request} is outside the {self.dram.size}-byte DRAM image (cycle {now})"
            )
        elif addr // BURST_BOUNDARY_BYTES != (addr + nbytes - 1) // BURST_BOUNDARY_BYTES:
            problem = f"{request} crosses a {BURST_BOUNDARY_BYTES}-byte boundary"
        else:
            return
        raise SimulationError(f"rtl: memory protocol violation at cycle {now}: {problem}")
