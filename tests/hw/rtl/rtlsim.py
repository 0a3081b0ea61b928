"""Helpers for the amaranth.sim tests: a DRAM model on the CONTRACT.md memory ports and a
`Backend` that runs a Program on `hw.rtl.top.Accelerator` (slow: for small programs on tiny)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
from amaranth.sim import Simulator

from hw.config import BURST_BOUNDARY_BYTES, AcceleratorConfig
from hw.program import Program
from hw.rtl.top import COUNTERS, Accelerator
from sim.backend import RunResult, SimulationError, Stats


class Dram:
    """Byte-addressed DRAM serving AR/R in order after `latency` cycles and AW/W with strobes.

    `p_ready` < 1 makes the model drop ar_ready/w_ready and R beats at random (seeded).
    `ports` maps the CONTRACT.md names without the `mem_` prefix to signals.
    """

    def __init__(self, image: np.ndarray, ports: Mapping[str, Any], *, bus_bytes: int,
                 latency: int = 8, p_ready: float = 1.0, seed: int = 0) -> None:
        self.image, self.p, self.bus_bytes, self.latency = image, ports, bus_bytes, latency
        self.p_ready = p_ready
        self.rng = np.random.default_rng(seed)
        self.reads: deque[list[int]] = deque()  # [due cycle, addr, beats left]
        self.writes: deque[list[int]] = deque()  # [addr, beats left]
        self.cycle = 0
        self.ar_count = self.r_beats = self.w_beats = 0
        self.max_inflight = 0
        self.bursts_to_boundary = 0  # AR/AW bursts that end exactly at a 4 KiB boundary

    def _coin(self) -> bool:
        return self.p_ready >= 1.0 or bool(self.rng.random() < self.p_ready)

    def word(self, addr: int) -> int:
        return int.from_bytes(self.image[addr : addr + self.bus_bytes].tobytes(), "little")

    async def step(self, ctx: Any, monitor: Any = None) -> None:
        """One clock cycle: drive the slave outputs, sample the handshakes (and call
        `monitor(ctx)` to sample other signals of this cycle), tick."""
        p = self.p
        ar_ready, w_ready = self._coin(), self._coin()
        head = self.reads[0] if self.reads else None
        r_valid = head is not None and head[0] <= self.cycle and self._coin()
        ctx.set(p["ar_ready"], ar_ready)
        writes = "aw_valid" in p
        if writes:
            ctx.set(p["aw_ready"], 1)
            ctx.set(p["w_ready"], w_ready)
        ctx.set(p["r_valid"], r_valid)
        if r_valid:
            assert head is not None
            ctx.set(p["r_data"], self.word(head[1]))
            ctx.set(p["r_last"], head[2] == 1)
        if ar_ready and ctx.get(p["ar_valid"]):
            addr, beats = ctx.get(p["ar_addr"]), ctx.get(p["ar_len"]) + 1
            assert addr % self.bus_bytes == 0, f"unaligned AR {addr:#x}"
            self._check_boundary("AR", addr, beats)
            self.reads.append([self.cycle + self.latency, addr, beats])
            self.ar_count += 1
            self.max_inflight = max(self.max_inflight, len(self.reads))
        if r_valid and ctx.get(p["r_ready"]):
            assert head is not None
            self.r_beats += 1
            head[1] += self.bus_bytes
            head[2] -= 1
            if head[2] == 0:
                self.reads.popleft()
        if writes:
            self._write_channels(ctx, w_ready)
        if monitor is not None:
            monitor(ctx)
        await ctx.tick()
        self.cycle += 1

    def _check_boundary(self, channel: str, addr: int, beats: int) -> None:
        last = addr + beats * self.bus_bytes - 1
        assert addr // BURST_BOUNDARY_BYTES == last // BURST_BOUNDARY_BYTES, (
            f"{channel} {addr:#x} of {beats} beats crosses a {BURST_BOUNDARY_BYTES}-byte boundary")
        self.bursts_to_boundary += (last + 1) % BURST_BOUNDARY_BYTES == 0

    def _write_channels(self, ctx: Any, w_ready: bool) -> None:
        p = self.p
        if ctx.get(p["aw_valid"]):
            addr = ctx.get(p["aw_addr"])
            assert addr % self.bus_bytes == 0, f"unaligned AW {addr:#x}"
            self._check_boundary("AW", addr, ctx.get(p["aw_len"]) + 1)
            self.writes.append([addr, ctx.get(p["aw_len"]) + 1])
        if w_ready and ctx.get(p["w_valid"]):
            self._write(ctx)

    def _write(self, ctx: Any) -> None:
        p = self.p
        assert self.writes, "W beat before its AW"
        burst = self.writes[0]
        data, strb, last = ctx.get(p["w_data"]), ctx.get(p["w_strb"]), ctx.get(p["w_last"])
        raw = data.to_bytes(self.bus_bytes, "little")
        for k in range(self.bus_bytes):
            if strb >> k & 1:
                self.image[burst[0] + k] = raw[k]
        self.w_beats += 1
        burst[0] += self.bus_bytes
        burst[1] -= 1
        assert bool(last) == (burst[1] == 0), "w_last does not match the AW length"
        if burst[1] == 0:
            self.writes.popleft()


def mem_ports(dut: Accelerator) -> dict[str, Any]:
    return {name.removeprefix("mem_"): getattr(dut, name)
            for name in dir(dut) if name.startswith("mem_")}


class AmaranthBackend:
    """Backend `rtl-amaranth`: runs a Program on the Accelerator in amaranth.sim."""

    name = "rtl-amaranth"

    def __init__(self, config: AcceleratorConfig, *, latency: int = 8, p_ready: float = 1.0,
                 seed: int = 0, max_cycles: int = 50_000, idle_cycles: int = 400) -> None:
        self.config = config
        self.latency, self.p_ready, self.seed = latency, p_ready, seed
        self.max_cycles, self.idle_cycles = max_cycles, idle_cycles
        self.dram: Dram | None = None

    def run(self, program: Program, inputs: Mapping[str, np.ndarray]) -> RunResult:
        program.check_config(self.config)
        image = program.initial_dram(inputs)
        insn = program.insn_region
        dut = Accelerator(self.config)
        dram = self.dram = Dram(image, mem_ports(dut), bus_bytes=self.config.bus_bytes,
                                latency=self.latency, p_ready=self.p_ready, seed=self.seed)
        result: dict[str, Any] = {}

        async def bench(ctx: Any) -> None:
            ctx.set(dut.insn_addr, insn.offset)
            ctx.set(dut.insn_count, insn.shape[0])
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            last_progress, last_seen = 0, None
            while not ctx.get(dut.done):
                await dram.step(ctx)
                if dram.cycle % 32 == 0:
                    seen = (dram.ar_count, dram.r_beats, dram.w_beats,
                            *(ctx.get(getattr(dut, f"cnt_{n}_insns")) for n in
                              ("load", "compute", "store")))
                    if seen != last_seen:
                        last_progress, last_seen = dram.cycle, seen
                if dram.cycle - last_progress > self.idle_cycles or dram.cycle > self.max_cycles:
                    raise SimulationError(f"deadlock: no progress after {dram.cycle} cycles")
            for _ in range(4):  # the last W beats are written before done; drain nothing more
                await dram.step(ctx)
            result.update({n: ctx.get(getattr(dut, f"cnt_{n}")) for n in COUNTERS})

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
        sim.run()
        stats = Stats(**result)
        return RunResult(program.read_outputs(image), stats, image)
