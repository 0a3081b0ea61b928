"""LoadDMA (2-D strided load with padding, optionally widening a narrow format) and the memory
master, against numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hw import isa
from hw.config import BURST_BOUNDARY_BYTES, PRESETS
from hw.rtl.decode import insn_struct
from hw.rtl.dma import LoadDMA, Widening
from hw.rtl.memory import ReadArbiter
from tests.hw.rtl.rtlsim import Dram

CFG = PRESETS["tiny"]
BUS_BITS = 64


class DmaBench(wiring.Component):
    """A LoadDMA behind the ReadArbiter, as in the accelerator."""

    def __init__(self, elem_bytes: int, inflight: int, widening: Widening | None = None,
                 max_burst_beats: int = 4) -> None:
        self.dma = LoadDMA(mem_layout=insn_struct(CFG, "mem"), elem_bytes=elem_bytes, depth=256,
                           bus_bits=BUS_BITS, max_burst_beats=max_burst_beats, widening=widening)
        self.arb = ReadArbiter(clients=1, bus_bits=BUS_BITS, inflight=inflight)
        super().__init__({})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.dma, m.submodules.arb = self.dma, self.arb
        wiring.connect(m, self.dma.bus, self.arb.client(0))
        return m


def expected_sram(image: np.ndarray, load: isa.Load, elem_bytes: int) -> list[bytes]:
    zero = bytes(elem_bytes)
    rows: list[bytes] = []
    width = load.x_pad_0 + load.x_size + load.x_pad_1
    rows += [zero] * (load.y_pad_0 * width)
    for y in range(load.y_size):
        rows += [zero] * load.x_pad_0
        for x in range(load.x_size):
            at = (load.dram_base + y * load.x_stride + x) * elem_bytes
            rows.append(image[at : at + elem_bytes].tobytes())
        rows += [zero] * load.x_pad_1
    rows += [zero] * (load.y_pad_1 * width)
    return rows


LOADS = [
    isa.Load(memory_type=isa.MemType.INP, sram_base=3, dram_base=5, y_size=3, x_size=5,
             x_stride=9, y_pad_0=1, y_pad_1=2, x_pad_0=2, x_pad_1=1),
    isa.Load(memory_type=isa.MemType.INP, sram_base=0, dram_base=1, y_size=2, x_size=1,
             x_stride=3),
    isa.Load(memory_type=isa.MemType.INP, sram_base=7, dram_base=0, y_size=1, x_size=23,
             x_stride=23, x_pad_0=1),
    isa.Load(memory_type=isa.MemType.INP, sram_base=0, dram_base=2, y_size=0, x_size=2,
             x_stride=2, y_pad_0=1, y_pad_1=1),
]


def widened(rows: list[bytes], w: Widening) -> list[bytes]:
    """Each element's `narrow_bits` lanes sign-extended to `wide_bits` (numpy reference)."""
    narrow, wide = (np.dtype(f"<i{bits // 8}") for bits in (w.narrow_bits, w.wide_bits))
    return [np.frombuffer(row, narrow).astype(wide).tobytes() for row in rows]


def run_loads(bench: DmaBench, elem_bytes: int, loads: list[tuple[isa.Load, bool]], *,
              p_ready: float, image_bytes: int = 4096) -> Dram:
    """Run `loads` (each with its `narrow` flag) back to back; check every SRAM write."""
    dma, widening = bench.dma, bench.dma.widening
    rng = np.random.default_rng(elem_bytes)
    image = rng.integers(0, 256, image_bytes, dtype=np.uint8)
    ports = {n: getattr(bench.arb.mem, n)
             for n in ("ar_valid", "ar_ready", "ar_addr", "ar_len",
                       "r_valid", "r_ready", "r_data", "r_last")}
    dram = Dram(image, ports, bus_bytes=BUS_BITS // 8, latency=7, p_ready=p_ready, seed=1)
    layout = insn_struct(CFG, "mem")

    async def run_one(ctx: Any, load: isa.Load, narrow: bool) -> list[bytes]:
        written: dict[int, bytes] = {}
        word = isa.encode_insn(load, CFG)
        ctx.set(dma.cmd, layout.const({f.name: (word >> f.offset) & ((1 << f.width) - 1)
                                       for f in isa.layouts(CFG)["mem"].fields}))
        if widening is not None:
            ctx.set(dma.narrow, narrow)
        ctx.set(dma.start, 1)
        await dram.step(ctx)
        ctx.set(dma.start, 0)
        if widening is not None:
            ctx.set(dma.narrow, not narrow)  # only its value with `start` counts

        def monitor(ctx: Any) -> None:
            if ctx.get(dma.sram.en):
                addr, data = ctx.get(dma.sram.addr), ctx.get(dma.sram.data)
                assert addr not in written, f"SRAM address {addr} written twice"
                written[addr] = data.to_bytes(elem_bytes, "little")

        while ctx.get(dma.busy):
            await dram.step(ctx, monitor)
        n = load.row_elems * (load.y_pad_0 + load.y_size + load.y_pad_1)
        return [written.get(load.sram_base + i, b"?") for i in range(n)]

    async def bench_proc(ctx: Any) -> None:
        for load, narrow in loads:
            got = await run_one(ctx, load, narrow)
            if narrow:
                assert widening is not None
                want = widened(expected_sram(image, load, widening.narrow_elem_bytes), widening)
            else:
                want = expected_sram(image, load, elem_bytes)
            assert got == want, (load, narrow)
        assert dram.max_inflight <= 3

    sim = Simulator(bench)
    sim.add_clock(1e-6)
    sim.add_testbench(bench_proc)
    sim.run()
    return dram


@pytest.mark.parametrize("elem_bytes", [4, 8, 32])
@pytest.mark.parametrize("p_ready", [1.0, 0.6])
def test_load_dma_writes_padded_rows(elem_bytes: int, p_ready: float) -> None:
    run_loads(DmaBench(elem_bytes, inflight=3), elem_bytes, [(load, False) for load in LOADS],
              p_ready=p_ready)


# On the 64-bit bus: narrow elements of 1 to 16 bytes (several per beat, one beat, two beats),
# wide ones of 4 to 32 bytes (two per beat up to four beats).
@pytest.mark.parametrize(("lanes", "narrow_bits", "wide_bits"),
                         [(1, 8, 32), (2, 8, 16), (4, 8, 32), (8, 8, 32), (8, 16, 32),
                          (16, 8, 16)])
@pytest.mark.parametrize("p_ready", [1.0, 0.6])
def test_widening_dma_sign_extends_narrow_loads(lanes: int, narrow_bits: int, wide_bits: int,
                                                p_ready: float) -> None:
    """Narrow (ACC_8BIT-like) and wide loads interleaved on one DMA: each narrow lane is
    sign-extended, with the same padding, strides and SRAM addresses as a wide load."""
    widening = Widening(lanes=lanes, narrow_bits=narrow_bits, wide_bits=wide_bits)
    elem_bytes = lanes * wide_bits // 8
    loads = [(load, narrow) for load in LOADS for narrow in (True, False)]
    run_loads(DmaBench(elem_bytes, inflight=3, widening=widening), elem_bytes, loads,
              p_ready=p_ready)


def loads_across(elem_bytes: int) -> list[isa.Load]:
    """Loads whose first row starts 4 or 8 bus words before the 4 KiB boundary and runs 12
    words (a 16-beat burst would cross it), with and without padding."""
    loads = []
    for words_before, pads in ((4, (0, 0, 0, 0)), (8, (1, 0, 2, 1))):
        base = (BURST_BOUNDARY_BYTES - words_before * BUS_BITS // 8) // elem_bytes
        x_size = 96 // elem_bytes
        loads.append(isa.Load(memory_type=isa.MemType.INP, sram_base=1, dram_base=base, y_size=2,
                              x_size=x_size, x_stride=x_size + 1, y_pad_0=pads[0],
                              y_pad_1=pads[1], x_pad_0=pads[2], x_pad_1=pads[3]))
    return loads


@pytest.mark.parametrize("elem_bytes", [4, 8, 32])
def test_load_dma_cuts_bursts_at_4_kib(elem_bytes: int) -> None:
    """Rows across the boundary load correctly; the DRAM model asserts that no burst crosses
    it, and some bursts end exactly there."""
    dram = run_loads(DmaBench(elem_bytes, inflight=3, max_burst_beats=16), elem_bytes,
                     [(load, False) for load in loads_across(elem_bytes)], p_ready=0.7,
                     image_bytes=2 * BURST_BOUNDARY_BYTES)
    assert dram.bursts_to_boundary == 2
