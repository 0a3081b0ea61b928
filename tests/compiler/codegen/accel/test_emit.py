"""`emit`: the final loop IR -> a Program through ProgramBuilder.

Expected programs follow the contract: the host loops are unrolled with concrete values; DMA
addresses are element offsets within each tensor's DRAM region, pads decided per tile; micro-op
kernels are placed once each in micro-op memory (identical ones shared) by one LOAD UOP first;
tokens follow VTA's rules (a pop is a flag on the module's next instruction, a push a flag on
the module's last one or a NOP), and the stream ends by draining into compute, then FINISH.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.build import build
from compiler.errors import ScheduleError
from compiler.target import AcceleratorTarget
from hw import isa
from hw.config import PRESETS
from hw.program import Program
from sim.fsim import FunctionalSimulator
from tests.compiler.passes.cases import TINY, conv, matmul, matmul_data


def _listing(program: Program) -> list[str]:
    return [isa.format_insn(i) for i in program.decoded(TINY.cfg)]


def _uops(program: Program) -> list[tuple[int, int, int]]:
    u = isa.decode_uops(program.constants["__uops"], TINY.cfg)
    return list(zip(u["dst"].tolist(), u["src"].tolist(), u["wgt"].tolist(), strict=True))


def test_a_matmul_program():
    # regions, each on a 4 KiB page: a at byte 0, w at 4096 (WGT element 16 bytes: 256), out at
    # 8192 (4 bytes: 2048), the micro-ops at 12288 (4 bytes: 3072).  The chain's entry push is a
    # compute NOP, the carried store->compute entry a store NOP; each k step: inp and wgt loads
    # (the first pops the chain, the last pushes to compute), the GEMM pops them and pushes the
    # chain back; after the last step the GEMM also pushes to store, whose STORE pushes the acc
    # back to compute.
    built = build(matmul(), TINY)
    assert _listing(built.program) == [
        "LOAD UOP sram=0 dram=3072 y=1 x=1 stride=1 pad=(0,0,0,0)",
        "NOP-COMPUTE  [push_prev]",
        "NOP-STORE  [push_prev]",
        "GEMM reset uops=[0,1) out=1(dst+0,src+0,wgt+0) in=1(dst+0,src+0,wgt+0)  [pop_next]",
        "LOAD INP sram=0 dram=0 y=1 x=1 stride=1 pad=(0,0,0,0)  [pop_next]",
        "LOAD WGT sram=0 dram=256 y=1 x=1 stride=1 pad=(0,0,0,0)  [push_next]",
        "GEMM uops=[0,1) out=1(dst+0,src+0,wgt+0) in=1(dst+0,src+0,wgt+0)  [pop_prev push_prev]",
        "LOAD INP sram=0 dram=1 y=1 x=1 stride=1 pad=(0,0,0,0)  [pop_next]",
        "LOAD WGT sram=0 dram=257 y=1 x=1 stride=1 pad=(0,0,0,0)  [push_next]",
        "GEMM uops=[0,1) out=1(dst+0,src+0,wgt+0) in=1(dst+0,src+0,wgt+0)  [pop_prev push_prev push_next]",
        "STORE OUT sram=0 dram=2048 y=1 x=1 stride=1 pad=(0,0,0,0)  [pop_prev push_prev]",
        "GEMM reset uops=[0,1) out=1(dst+0,src+0,wgt+0) in=1(dst+0,src+0,wgt+0)  [pop_next]",
        "LOAD INP sram=0 dram=0 y=1 x=1 stride=1 pad=(0,0,0,0)  [pop_next]",
        "LOAD WGT sram=0 dram=258 y=1 x=1 stride=1 pad=(0,0,0,0)  [push_next]",
        "GEMM uops=[0,1) out=1(dst+0,src+0,wgt+0) in=1(dst+0,src+0,wgt+0)  [pop_prev push_prev]",
        "LOAD INP sram=0 dram=1 y=1 x=1 stride=1 pad=(0,0,0,0)  [pop_next]",
        "LOAD WGT sram=0 dram=259 y=1 x=1 stride=1 pad=(0,0,0,0)  [push_next]",
        "GEMM uops=[0,1) out=1(dst+0,src+0,wgt+0) in=1(dst+0,src+0,wgt+0)  [pop_prev push_prev push_next]",
        "STORE OUT sram=0 dram=2049 y=1 x=1 stride=1 pad=(0,0,0,0)  [pop_prev push_prev]",
        "NOP-STORE  [push_prev]",
        "NOP-LOAD  [pop_next push_next]",
        "NOP-COMPUTE  [pop_next]",
        "FINISH  [pop_prev pop_next]",
    ]
    # the reset and the GEMM share one micro-op: (0, 0, 0); the reset is the instruction's flag
    assert _uops(built.program) == [(0, 0, 0)]
    inputs, expected = matmul_data()
    assert np.array_equal(FunctionalSimulator(TINY.cfg).run(built.program, inputs).outputs["out"], expected)


def test_identical_kernels_are_placed_once():
    # two threads: resets of acc 0 and 1, GEMMs (0, 0, 0) (shared with thread 0's reset) and
    # (1, 1, 1), in order of first use
    assert _uops(build(matmul(threads=2), TINY).program) == [(0, 0, 0), (1, 0, 0), (1, 1, 1)]


def test_a_convolution_program_folds_loops_and_pads_per_tile():
    program = build(conv(), TINY).program
    listing = _listing(program)
    # the reset folds y (acc + 4) and x (+ 1); the GEMM folds x (acc, inp + 1) and ry (inp + 6,
    # wgt + 3) around its 6 micro-ops (y, rx), placed after the reset's
    assert listing[2] == ("GEMM reset uops=[0,1) out=2(dst+4,src+0,wgt+0) in=4(dst+1,src+0,wgt+0)  "
                          "[pop_next push_prev]")
    assert listing[5] == ("GEMM uops=[1,7) out=4(dst+1,src+1,wgt+0) in=3(dst+0,src+6,wgt+3)  "
                          "[pop_prev push_next]")
    assert _uops(program) == [(0, 0, 0), (0, 0, 0), (0, 1, 1), (0, 2, 2), (4, 6, 0), (4, 7, 1), (4, 8, 2)]
    # tile 0 reads data rows -1 .. 2, tile 1 rows 1 .. 4, columns -1 .. 4: out-of-range ones padded
    loads = [line for line in listing if line.startswith("LOAD INP")]
    assert loads == ["LOAD INP sram=0 dram=0 y=3 x=4 stride=4 pad=(1,0,1,1)  [pop_next]",
                     "LOAD INP sram=0 dram=4 y=3 x=4 stride=4 pad=(0,1,1,1)  [pop_next]"]


@pytest.mark.parametrize("uop_bytes", [32, 16])
def test_the_micro_op_buffer_bounds_the_kernels(uop_bytes):
    # conv's kernels need 1 + 6 micro-op entries: 8 hold them, 4 do not
    target = AcceleratorTarget(PRESETS["tiny"].with_params(name="tiny-uops", uop_bytes=uop_bytes))
    assert target.uop_depth == uop_bytes // 4
    if target.uop_depth >= 7:
        assert build(conv(t=target), target).program.constants["__uops"].shape[0] == 7
        return
    with pytest.raises(ScheduleError, match="^micro-op kernels need more than 4 entries, the size of the "
                                            "micro-op buffer; use smaller tiles$"):
        build(conv(t=target), target)
