"""`ComputeModule`: LOAD UOP/ACC, GEMM, ALU and FINISH, with the micro-op pipeline."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig
from hw.rtl import bus
from hw.rtl.decode import insn_struct, log2
from hw.rtl.dma import Widening
from hw.rtl.load import addr_bits, load_dma
from hw.rtl.loops import LoopGenerator
from hw.rtl.pipeline import UopPipeline, out_lanes
from hw.rtl.sequencer import Sequencer


class Kind(enum.Enum, shape=3):  # type: ignore[call-arg]
    NOP = 0
    LOAD_UOP = 1
    LOAD_ACC = 2  # and LOAD ACC_8BIT, through the same DMA
    GEMM = 3
    ALU = 4
    FINISH = 5


def acc_8bit_widening(cfg: AcceleratorConfig) -> Widening:
    """LOAD ACC_8BIT's element: an acc tile of `inp_bits` lanes, sign-extended to `acc_bits`."""
    return Widening(lanes=cfg.batch * cfg.block_out, narrow_bits=cfg.inp_bits,
                    wide_bits=cfg.acc_bits)


class ComputeModule(wiring.Component):
    """Executes the compute queue in order.

    Tokens: pop_prev pops load->compute (`l2c`), pop_next pops store->compute (`s2c`);
    push_prev pushes compute->load (`c2l`), push_next compute->store (`c2s`), after the
    instruction's last SRAM write.  GEMM/ALU: the loop generator issues one micro-op per cycle
    into `UopPipeline`; a GEMM/ALU retires when its last micro-op is issued, so the next one
    starts in the following cycle while it drains (no bubble between GEMM/ALU instructions); its
    token pushes travel with that micro-op and are sent after its acc write.
    LOAD UOP/ACC (two LoadDMAs, read clients `bus_uop`, `bus_acc`) and FINISH wait for the
    pipeline to drain first.  LOAD ACC_8BIT runs on the acc DMA in its narrow format: elements of
    `inp_bits` lanes, each sign-extended to `acc_bits`.  `done` rises the cycle after FINISH
    retires.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        acc_w, ab = cfg.acc_elem_bits, addr_bits(cfg.acc_depth)
        rd, wr = bus.sram_read, bus.sram_write
        super().__init__({
            "cmd": In(stream.Signature(isa.INSN_BITS)),
            "bus_uop": Out(bus.read_bus(cfg.bus_bits)), "bus_acc": Out(bus.read_bus(cfg.bus_bits)),
            "uop_wr": Out(wr(addr_bits(cfg.uop_depth), cfg.uop_elem_bits)),
            "uop_rd": Out(rd(addr_bits(cfg.uop_depth), cfg.uop_elem_bits)),
            "inp_rd": Out(rd(addr_bits(cfg.inp_depth), cfg.inp_elem_bits)),
            "wgt_rd": Out(rd(addr_bits(cfg.wgt_depth), cfg.wgt_elem_bits)),
            "acc_wr": Out(wr(ab, acc_w)), "acc_rd0": Out(rd(ab, acc_w)), "acc_rd1": Out(rd(ab, acc_w)),
            "out_wr": Out(wr(addr_bits(cfg.out_depth), cfg.out_elem_bits)),
            "l2c": Out(bus.token_pop()), "s2c": Out(bus.token_pop()),
            "c2l": Out(bus.token_push()), "c2s": Out(bus.token_push()),
            "done": Out(1),
            "gemm_read": Out(1),
            "ev_busy": Out(1), "ev_stall": Out(1), "ev_insn": Out(1), "ev_gemm_busy": Out(1),
            "ev_gemm_uop": Out(1), "ev_alu_uop": Out(1), "ev_uop_bytes": Out(32),
            "ev_acc_bytes": Out(32),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.seq = seq = Sequencer(pops=2, pushes=2)
        m.submodules.uop_dma = uop_dma = load_dma(cfg, isa.MemType.UOP)
        m.submodules.acc_dma = acc_dma = load_dma(cfg, isa.MemType.ACC, acc_8bit_widening(cfg))
        m.submodules.gen = gen = LoopGenerator(cfg)
        m.submodules.pipe = pipe = UopPipeline(cfg)
        mem = data.View(insn_struct(cfg, "mem"), self.cmd.payload)
        head = self._decode(m, mem)
        kind = Signal(Kind)
        with m.If(seq.start):
            m.d.sync += kind.eq(head)
        busy = gen.valid | pipe.active
        # GEMM/ALU push their tokens when their last micro-op writes (deferred, see _pushes);
        # an empty loop has no micro-op and pushes through the sequencer.
        is_loop = (head == Kind.GEMM) | (head == Kind.ALU)
        deferred = is_loop & ~gen.empty
        pending_free = self._pushes(m, seq, pipe)
        done = Signal()
        with m.Switch(kind):
            with m.Case(Kind.GEMM, Kind.ALU):
                m.d.comb += done.eq(gen.last | ~gen.valid)
            with m.Case(Kind.LOAD_UOP):
                m.d.comb += done.eq(~uop_dma.busy)
            with m.Case(Kind.LOAD_ACC):
                m.d.comb += done.eq(~acc_dma.busy)
            with m.Default():
                m.d.comb += done.eq(1)
        push_flags = mem.push_prev | (mem.push_next << 1)
        m.d.comb += [
            seq.valid.eq(self.cmd.valid),
            seq.can_start.eq(Mux(is_loop, self._pending_room, ~busy & pending_free)),
            seq.pop_req.eq(mem.pop_prev | (mem.pop_next << 1)),
            seq.push_req.eq(Mux(deferred, 0, push_flags)), gen.loop.ctrl.push.eq(push_flags),
            seq.done.eq(done), self.cmd.ready.eq(seq.start),
            uop_dma.cmd.eq(mem), acc_dma.cmd.eq(mem),
            acc_dma.narrow.eq(mem.memory_type == isa.MemType.ACC_8BIT),
            uop_dma.start.eq(seq.start & (head == Kind.LOAD_UOP)),
            acc_dma.start.eq(seq.start & (head == Kind.LOAD_ACC)),
            gen.start.eq(seq.start & is_loop),
        ]
        self._loop_fields(m, gen)
        with m.If(seq.retire & (kind == Kind.FINISH)):
            m.d.sync += self.done.eq(1)
        wiring.connect(m, seq.pop0, wiring.flipped(self.l2c))
        wiring.connect(m, seq.pop1, wiring.flipped(self.s2c))
        wiring.connect(m, uop_dma.bus, wiring.flipped(self.bus_uop))
        wiring.connect(m, acc_dma.bus, wiring.flipped(self.bus_acc))
        wiring.connect(m, uop_dma.sram, wiring.flipped(self.uop_wr))
        self._pipeline(m, gen, pipe, acc_dma)
        self._events(m, seq, head, kind, busy, pipe, mem)
        return m

    def _pushes(self, m: Module, seq: Sequencer, pipe: UopPipeline):  # type: ignore[no-untyped-def]
        """Token pushes of GEMM/ALU instructions, counted when their last micro-op writes and
        sent when the token counter has room (and the sequencer is not pushing there itself).
        Returns "nothing pending" (LOAD and FINISH wait for it, GEMM/ALU wait below 8)."""
        free = Signal(init=1)
        room = Signal(init=1)
        for bit, (port, seq_port) in enumerate(((self.c2l, seq.push0), (self.c2s, seq.push1))):
            pending = Signal(4, name=f"pending_push{bit}")
            send = (pending != 0) & port.room & ~seq_port.push
            m.d.comb += [port.push.eq(seq_port.push | send), seq_port.room.eq(port.room)]
            m.d.sync += pending.eq(pending + pipe.ev_push[bit] - send)
            with m.If(pending != 0):
                m.d.comb += free.eq(0)
            with m.If(pending[3]):
                m.d.comb += room.eq(0)
        self._pending_room = room
        return free

    def _decode(self, m: Module, mem: data.View) -> Signal:
        head = Signal(Kind)
        with m.Switch(mem.opcode):
            with m.Case(isa.Opcode.LOAD):
                with m.If(mem.x_size == 0):
                    m.d.comb += head.eq(Kind.NOP)
                with m.Elif(mem.memory_type == isa.MemType.UOP):
                    m.d.comb += head.eq(Kind.LOAD_UOP)
                with m.Elif((mem.memory_type == isa.MemType.ACC)
                            | (mem.memory_type == isa.MemType.ACC_8BIT)):
                    m.d.comb += head.eq(Kind.LOAD_ACC)
            with m.Case(isa.Opcode.GEMM):
                m.d.comb += head.eq(Kind.GEMM)
            with m.Case(isa.Opcode.ALU):
                m.d.comb += head.eq(Kind.ALU)
            with m.Case(isa.Opcode.FINISH):
                m.d.comb += head.eq(Kind.FINISH)
        return head

    def _loop_fields(self, m: Module, gen: LoopGenerator) -> None:
        """The loop generator's fields from the GEMM or the ALU view of the head instruction."""
        gemm = data.View(insn_struct(self.cfg, "gemm"), self.cmd.payload)
        alu = data.View(insn_struct(self.cfg, "alu"), self.cmd.payload)
        is_alu = gemm.opcode == isa.Opcode.ALU
        common = ("uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out", "dst_factor_in")
        with m.If(is_alu):
            for name in (*common, "src_factor_out", "src_factor_in"):
                m.d.comb += gen.loop[name].eq(alu[name])
            m.d.comb += [gen.loop.ctrl.alu.eq(1), gen.loop.ctrl.op.eq(alu.alu_opcode),
                         gen.loop.ctrl.use_imm.eq(alu.use_imm), gen.loop.ctrl.imm.eq(alu.imm)]
        with m.Else():
            for name in (*common, "src_factor_out", "src_factor_in", "wgt_factor_out",
                         "wgt_factor_in"):
                m.d.comb += gen.loop[name].eq(gemm[name])
            m.d.comb += gen.loop.ctrl.reset.eq(gemm.reset)

    def _pipeline(self, m: Module, gen: LoopGenerator, pipe: UopPipeline, acc_dma) -> None:  # type: ignore[no-untyped-def]
        for name in ("valid", "k", "dst", "src", "wgt", "ctrl"):
            m.d.comb += getattr(pipe, name).eq(getattr(gen, name))
        for mine, theirs in ((self.uop_rd, pipe.uop), (self.inp_rd, pipe.inp),
                             (self.wgt_rd, pipe.wgt_rd), (self.acc_rd0, pipe.acc_dst),
                             (self.acc_rd1, pipe.acc_src)):
            wiring.connect(m, theirs, wiring.flipped(mine))
        # acc and out are written by the pipeline or by LOAD ACC, never in the same cycle.
        with m.If(acc_dma.sram.en):
            m.d.comb += [
                self.acc_wr.en.eq(1), self.acc_wr.addr.eq(acc_dma.sram.addr),
                self.acc_wr.data.eq(acc_dma.sram.data),
                self.out_wr.en.eq(1), self.out_wr.addr.eq(acc_dma.sram.addr),
                self.out_wr.data.eq(out_lanes(self.cfg, acc_dma.sram.data)),
            ]
        with m.Else():
            for mine, theirs in ((self.acc_wr, pipe.acc_wr), (self.out_wr, pipe.out_wr)):
                m.d.comb += [getattr(mine, n).eq(getattr(theirs, n)) for n in ("en", "addr", "data")]

    def _events(self, m, seq, head, kind, busy, pipe, mem) -> None:  # type: ignore[no-untyped-def]
        cfg = self.cfg
        # Reset GEMMs count neither as GEMM micro-ops nor as GEMM busy time (VTA's convention).
        gemm = data.View(insn_struct(cfg, "gemm"), self.cmd.payload)
        accumulating = Signal()
        gemm_now = Signal()
        with m.If(seq.start):
            m.d.sync += accumulating.eq(~gemm.reset)
            m.d.comb += gemm_now.eq((head == Kind.GEMM) & ~gemm.reset)
        with m.Else():
            m.d.comb += gemm_now.eq(seq.busy & (kind == Kind.GEMM) & accumulating)
        m.d.comb += [
            self.ev_busy.eq(seq.busy | busy), self.ev_stall.eq(seq.stall & ~busy),
            self.ev_insn.eq(seq.start),
            self.ev_gemm_busy.eq(gemm_now | pipe.gemm_active), self.gemm_read.eq(pipe.gemm_read),
            self.ev_gemm_uop.eq(pipe.ev_gemm_uop), self.ev_alu_uop.eq(pipe.ev_alu_uop),
        ]
        elems = Signal(32)  # x_size * y_size of the head LOAD: one multiplier for every count
        m.d.comb += elems.eq(mem.x_size * mem.y_size)
        with m.If(seq.start & (head == Kind.LOAD_UOP)):
            m.d.comb += self.ev_uop_bytes.eq(elems << log2(cfg.uop_elem_bytes))
        with m.If(seq.start & (head == Kind.LOAD_ACC)):
            narrow = mem.memory_type == isa.MemType.ACC_8BIT
            m.d.comb += self.ev_acc_bytes.eq(Mux(narrow, elems << log2(cfg.acc_8bit_elem_bytes),
                                                 elems << log2(cfg.acc_elem_bytes)))
