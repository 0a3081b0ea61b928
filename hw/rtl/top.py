"""`Accelerator`: the top level of CONTRACT.md, composed of fetch, load, compute, store, the
scratchpads, the token counters, the memory master and the performance counters."""

from __future__ import annotations

from typing import Any

from amaranth import (
    Cat,
    ClockDomain,
    ClockSignal,
    DomainRenamer,
    Module,
    ResetInserter,
    ResetSignal,
    Signal,
    Value,
)
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.rtl import bus
from hw.rtl.clockgate import gated_domain
from hw.rtl.compute import ComputeModule
from hw.rtl.fetch import Fetch
from hw.rtl.load import LoadModule
from hw.rtl.memory import ReadArbiter
from hw.rtl.pipeline import GEMM_DOMAIN
from hw.rtl.sram import Scratchpad
from hw.rtl.store import StoreModule
from hw.rtl.tokens import TokenCounter

COUNTERS = (
    "cycles", "load_busy_cycles", "load_stall_cycles", "compute_busy_cycles",
    "compute_stall_cycles", "store_busy_cycles", "store_stall_cycles", "gemm_busy_cycles",
    "gemm_uops", "alu_uops", "inp_load_bytes", "wgt_load_bytes", "acc_load_bytes",
    "uop_load_bytes", "out_store_bytes", "load_insns", "compute_insns", "store_insns",
)
COUNTER_BITS = 64
# Every memory channel crosses the top level through a two-entry FIFO (a register slice: full
# throughput, one cycle each way).  Nothing inside then depends combinationally on a port,
# which is what real memory interfaces want for timing, and it lets Verilator evaluate the
# design once per cycle instead of once more for every change of an input.
SLICE_DEPTH = 2


def top_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    """The flat port list of CONTRACT.md."""
    members = {"start": In(1), "insn_addr": In(32), "insn_count": In(32), "done": Out(1)}
    members.update({f"cnt_{name}": Out(COUNTER_BITS) for name in COUNTERS})
    for sig in (bus.read_bus(cfg.bus_bits), bus.write_bus(cfg.bus_bits)):
        members.update({f"mem_{name}": member for name, member in sig.members.items()})
    return wiring.Signature(members)


class Accelerator(wiring.Component):
    """The whole accelerator for `cfg`; see hw/rtl/CONTRACT.md for ports and semantics.

    `rst` and `start` are registered; the cycle after either, every block is reset
    (ResetInserter; SRAM contents are kept) and the counters are cleared; after `start`,
    insn_addr/insn_count are latched and fetch begins the cycle after that.  The design runs
    in a domain without a reset of its own (`core`, clocked by `clk`): no register depends
    combinationally on a port, so Verilator's input-combinational pass has almost nothing to
    do.  Read clients of the memory master: fetch, load inp, load wgt, compute uop, compute acc
    (round-robin); the store module owns the write channels.  The memory channels pass
    through register slices (SLICE_DEPTH).  The inp/wgt read ports run in GEMM_DOMAIN.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        super().__init__(top_signature(cfg))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.domains.core = ClockDomain("core", reset_less=True)
        rst = Signal()
        m.d.comb += [ClockSignal("core").eq(ClockSignal()), rst.eq(ResetSignal())]
        m.submodules.core = DomainRenamer("core")(self._core(rst))
        return m

    def _core(self, rst: Signal) -> Module:
        m = Module()
        cfg = self.cfg
        blocks: dict[str, Any] = {
            "fetch": Fetch(cfg), "load": LoadModule(cfg), "compute": ComputeModule(cfg),
            "store": StoreModule(cfg),
            "reads": ReadArbiter(clients=5, bus_bits=cfg.bus_bits, inflight=cfg.mem_inflight),
            **{q: TokenCounter(bits=cfg.token_counter_bits) for q in ("l2c", "c2l", "c2s", "s2c")},
            **self._scratchpads(),
        }
        self._rst, self._start, self._restart = Signal(), Signal(), Signal()
        m.d.sync += [self._rst.eq(rst), self._start.eq(self.start & ~rst)]
        m.d.comb += self._restart.eq(self._rst | self._start)
        for name, block in blocks.items():
            m.submodules[name] = ResetInserter(self._restart)(block)
        gated_domain(m, GEMM_DOMAIN, blocks["compute"].gemm_read)
        self._control(m, blocks["fetch"], blocks["compute"])
        self._connect(m, blocks)
        self._counters(m, blocks)
        return m

    def _scratchpads(self) -> dict[str, Scratchpad]:
        cfg = self.cfg
        return {
            "uop_mem": Scratchpad(depth=cfg.uop_depth, width=cfg.uop_elem_bits),
            "inp_mem": Scratchpad(depth=cfg.inp_depth, width=cfg.inp_elem_bits,
                                  read_domain=GEMM_DOMAIN),
            "wgt_mem": Scratchpad(depth=cfg.wgt_depth, width=cfg.wgt_elem_bits,
                                  read_domain=GEMM_DOMAIN),
            "acc_mem": Scratchpad(depth=cfg.acc_depth, width=cfg.acc_elem_bits, read_ports=2,
                                  transparent=True),
            "out_mem": Scratchpad(depth=cfg.out_depth, width=cfg.out_elem_bits),
        }

    def _control(self, m: Module, fetch: Fetch, compute: ComputeModule) -> None:
        go = Signal()
        insn_addr, insn_count = Signal(32), Signal(32)
        m.d.sync += go.eq(self._start)
        with m.If(self._start):
            m.d.sync += [insn_addr.eq(self.insn_addr), insn_count.eq(self.insn_count)]
        m.d.comb += [fetch.go.eq(go), fetch.insn_addr.eq(insn_addr),
                     fetch.insn_count.eq(insn_count), self.done.eq(compute.done)]

    def _connect(self, m: Module, b: dict) -> None:  # type: ignore[type-arg]
        fetch, load, compute, store, reads = (b[n] for n in ("fetch", "load", "compute", "store",
                                                              "reads"))
        wiring.connect(m, fetch.load_cmd, load.cmd)
        wiring.connect(m, fetch.compute_cmd, compute.cmd)
        wiring.connect(m, fetch.store_cmd, store.cmd)
        for i, client in enumerate((fetch.bus, load.bus_inp, load.bus_wgt, compute.bus_uop,
                                    compute.bus_acc)):
            wiring.connect(m, client, reads.client(i))
        pending = self._slices(m, reads.mem, store.bus)
        m.d.comb += store.writes_pending.eq(pending)
        for queue, producer, consumer in (("l2c", load.l2c, compute.l2c),
                                          ("c2l", compute.c2l, load.c2l),
                                          ("c2s", compute.c2s, store.c2s),
                                          ("s2c", store.s2c, compute.s2c)):
            wiring.connect(m, producer, b[queue].producer)
            wiring.connect(m, consumer, b[queue].consumer)
        pads = {n: b[f"{n}_mem"] for n in ("uop", "inp", "wgt", "acc", "out")}
        for port, pad_port in ((load.inp, pads["inp"].wr), (load.wgt, pads["wgt"].wr),
                               (compute.uop_wr, pads["uop"].wr), (compute.uop_rd, pads["uop"].rd0),
                               (compute.inp_rd, pads["inp"].rd0), (compute.wgt_rd, pads["wgt"].rd0),
                               (compute.acc_wr, pads["acc"].wr), (compute.acc_rd0, pads["acc"].rd0),
                               (compute.acc_rd1, pads["acc"].rd1), (compute.out_wr, pads["out"].wr),
                               (store.out, pads["out"].rd0)):
            wiring.connect(m, port, pad_port)

    def _slices(self, m: Module, reads: wiring.PureInterface, writes: wiring.PureInterface) -> Value:
        """The memory ports, each channel through a SLICE_DEPTH-entry FIFO; returns whether a
        write request or beat is still waiting in its slice."""
        pending: list[Value] = []  # r_rdy of the write channels' slices
        outgoing = (("ar", reads, ("ar_addr", "ar_len"), None),
                    ("aw", writes, ("aw_addr", "aw_len"), pending),
                    ("w", writes, ("w_data", "w_strb", "w_last"), pending))
        for channel, inner, fields, watch in outgoing:
            values = [getattr(inner, name) for name in fields]
            buf = self._slice(m, channel, sum(len(v) for v in values))
            m.d.comb += [
                buf.w_en.eq(getattr(inner, f"{channel}_valid")), buf.w_data.eq(Cat(*values)),
                getattr(inner, f"{channel}_ready").eq(buf.w_rdy),
                getattr(self, f"mem_{channel}_valid").eq(buf.r_rdy),
                buf.r_en.eq(getattr(self, f"mem_{channel}_ready")),
                Cat(*(getattr(self, f"mem_{name}") for name in fields)).eq(buf.r_data),
            ]
            if watch is not None:
                watch.append(buf.r_rdy)
        buf = self._slice(m, "r", self.cfg.bus_bits + 1)
        m.d.comb += [
            buf.w_en.eq(self.mem_r_valid), buf.w_data.eq(Cat(self.mem_r_data, self.mem_r_last)),
            self.mem_r_ready.eq(buf.w_rdy),
            reads.r_valid.eq(buf.r_rdy), Cat(reads.r_data, reads.r_last).eq(buf.r_data),
            buf.r_en.eq(reads.r_ready),
        ]
        return pending[0] | pending[1]

    def _slice(self, m: Module, channel: str, width: int) -> fifo.SyncFIFO:
        buf = fifo.SyncFIFO(width=width, depth=SLICE_DEPTH)
        m.submodules[f"{channel}_slice"] = ResetInserter(self._restart)(buf)
        return buf

    def _counters(self, m: Module, b: dict) -> None:  # type: ignore[type-arg]
        load, compute, store = b["load"], b["compute"], b["store"]
        running = Signal()
        with m.If(self._rst):
            m.d.sync += running.eq(0)
        with m.Elif(self._start):
            m.d.sync += running.eq(1)
        with m.Elif(compute.done):
            m.d.sync += running.eq(0)
        events = {
            "cycles": running & ~compute.done,
            "load_busy_cycles": load.ev_busy, "load_stall_cycles": load.ev_stall,
            "compute_busy_cycles": compute.ev_busy, "compute_stall_cycles": compute.ev_stall,
            "store_busy_cycles": store.ev_busy, "store_stall_cycles": store.ev_stall,
            "gemm_busy_cycles": compute.ev_gemm_busy, "gemm_uops": compute.ev_gemm_uop,
            "alu_uops": compute.ev_alu_uop, "inp_load_bytes": load.ev_inp_bytes,
            "wgt_load_bytes": load.ev_wgt_bytes, "acc_load_bytes": compute.ev_acc_bytes,
            "uop_load_bytes": compute.ev_uop_bytes, "out_store_bytes": store.ev_out_bytes,
            "load_insns": load.ev_insn, "compute_insns": compute.ev_insn,
            "store_insns": store.ev_insn,
        }
        for name, event in events.items():
            counter = getattr(self, f"cnt_{name}")
            with m.If(self._restart):
                m.d.sync += counter.eq(0)
            with m.Else():
                m.d.sync += counter.eq(counter + event)
