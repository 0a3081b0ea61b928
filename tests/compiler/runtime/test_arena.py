"""The device arena: relocated Programs compute what the originals do, in the same cycles, and
the plan never lets two buffers that are live at the same time share bytes."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.runtime.accel import AccelStep, conv_step
from compiler.runtime.arena import align_bytes, relocate
from compiler.runtime.model import CompiledModel
from compiler.target import AcceleratorTarget
from hw import isa
from hw.config import PRESETS, AcceleratorConfig
from hw.program import Program, ProgramBuilder, ProgramError
from sim.backends import make_backend
from tests.compiler.runtime.test_model import _quantized_graph


def _conv(cfg: AcceleratorConfig) -> tuple[AccelStep, dict[str, np.ndarray]]:
    """A 3x3 QConv step (its Program has input, constant, output, micro-op and instruction
    regions) and the Program's inputs."""
    rng = np.random.default_rng(3)
    t = AcceleratorTarget(cfg)
    x = rng.integers(-128, 128, (t.batch, 2 * t.block_in, 6, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (2 * t.block_out, x.shape[1], 3, 3)).astype(np.int8)
    bias, mult = rng.integers(-999, 999, w.shape[0]), rng.integers(1, 900, w.shape[0])
    step = conv_step("conv", t, x.shape, w, bias, mult, strides=(1, 1), pads=(1,) * 4, shift=12,
                     clip=(-128, 127))
    return step, step.pack([x])


def _scattered(program: Program, cfg: AcceleratorConfig) -> tuple[dict[str, int], int]:
    """New offsets for every region: in reverse order, past the program's own image, a gap of one
    alignment unit between them (every region moves)."""
    align = align_bytes(cfg)
    offsets, at = {}, -(-program.dram_bytes // align) * align + align
    for r in reversed(program.regions):
        offsets[r.name] = at
        at += -(-r.nbytes // align) * align + align
    return offsets, at + 3 * align


@pytest.mark.parametrize("name", ["tiny", "vta", "rect"])
def test_a_relocated_program_computes_the_same_outputs_in_the_same_cycles(name):
    cfg = PRESETS[name]
    step, feeds = _conv(cfg)
    program = step.compiled.built.program
    offsets, dram_bytes = _scattered(program, cfg)
    moved = relocate(program, offsets, cfg, dram_bytes)
    assert {r.name: r.offset for r in moved.regions} == offsets and moved.dram_bytes == dram_bytes
    assert all(offsets[r.name] != r.offset for r in program.regions)
    assert not np.array_equal(moved.insns, program.insns)  # the DMA addresses did change
    fsim = make_backend("fsim", cfg)
    want = fsim.run(program, feeds).outputs["out"]
    np.testing.assert_array_equal(fsim.run(moved, feeds).outputs["out"], want)
    timing = make_backend("timing", cfg)
    assert timing.run(moved).stats == timing.run(program).stats


def test_a_relocated_program_runs_in_a_caller_owned_dram():
    cfg = PRESETS["tiny"]
    step, feeds = _conv(cfg)
    program = step.compiled.built.program
    offsets, dram_bytes = _scattered(program, cfg)
    moved = relocate(program, offsets, cfg, dram_bytes)
    dram = np.full(dram_bytes, 0x5A, np.uint8)  # bytes outside the regions must stay as they are
    moved.write_dram(dram, feeds)
    before = dram.copy()
    stats = make_backend("fsim", cfg).run_in(moved, dram)
    out = moved.region("out")
    got = dram[out.offset : out.offset + out.nbytes].view(np.int8).reshape(out.shape)
    expected = make_backend("fsim", cfg).run(program, feeds)
    np.testing.assert_array_equal(got, expected.outputs["out"])
    assert stats == expected.stats
    outside = np.ones(dram_bytes, bool)
    outside[out.offset : out.offset + out.nbytes] = False
    np.testing.assert_array_equal(dram[outside], before[outside])


def test_moving_a_region_by_part_of_an_element_is_refused():
    cfg = PRESETS["vta"]
    program = _conv(cfg)[0].compiled.built.program
    kernel = program.region("kernel")
    wgt = cfg.elem_bytes(isa.MemType.WGT)
    new = kernel.offset + wgt + wgt // 2
    with pytest.raises(ProgramError, match=rf"region 'kernel' cannot move from offset {kernel.offset} to "
                       rf"{new}: {wgt + wgt // 2} bytes is not a multiple of the {wgt}-byte WGT elements "
                       r"that address it"):
        relocate(program, {"kernel": new}, cfg, program.dram_bytes + 4 * wgt)


def test_a_dma_address_outside_every_region_is_refused():
    cfg = PRESETS["tiny"]
    b = ProgramBuilder(cfg)
    data = b.region("data", (4, cfg.inp_elem_bytes), np.int8, "input")
    b.load(isa.MemType.INP, data, 0, y_size=1, x_size=1, elem_offset=9, push_next=True)  # past its end
    b.nop(isa.Module.COMPUTE, pop_prev=True)
    b.finish()
    program = b.build()
    address = 9 * cfg.inp_elem_bytes
    with pytest.raises(ProgramError, match=rf"instruction #0 \(LOAD.*\): DMA address {address} lies in no "
                       "region of the program"):
        relocate(program, {"data": 0}, cfg, program.dram_bytes)


def test_regions_must_fit_the_dram_and_exist():
    cfg = PRESETS["tiny"]
    program = _conv(cfg)[0].compiled.built.program
    out = program.region("out")
    with pytest.raises(ProgramError, match=rf"region 'out' at offset {program.dram_bytes} \({out.nbytes} "
                       rf"bytes\) does not fit a {program.dram_bytes}-byte DRAM"):
        relocate(program, {"out": program.dram_bytes}, cfg, program.dram_bytes)
    with pytest.raises(ProgramError, match=r"cannot relocate regions \['nope'\]: the program has data, "):
        relocate(program, {"nope": 0}, cfg, program.dram_bytes)


def test_the_alignment_is_a_page_and_a_multiple_of_every_element_and_the_bus_word(preset_cfg):
    align = align_bytes(preset_cfg)
    assert all(align % preset_cfg.elem_bytes(m) == 0 for m in isa.MemType)
    assert align % preset_cfg.bus_bytes == 0 and align == 4096  # a page: bursts end at page boundaries


# -- the plan of a model --------------------------------------------------------------------


@pytest.fixture(scope="module", params=["tiny", "vta"])
def model(request: pytest.FixtureRequest) -> CompiledModel:
    """c1 -> c2 -> QAdd(c1, c2) on the accelerator: c1 is read in place twice, c2 once."""
    return CompiledModel.compile(_quantized_graph(np.random.default_rng(7)),
                                 AcceleratorTarget(PRESETS[request.param]), offload_shallow=True)


def test_buffers_live_at_the_same_time_never_share_bytes(model):
    plan = model.device.plan
    buffers = list(plan.buffers.items())
    assert len(buffers) > 10
    for i, (key, a) in enumerate(buffers):
        assert a.offset % plan.align_bytes == 0 and a.offset + a.nbytes <= plan.arena_bytes
        for other, b in buffers[i + 1 :]:
            if a.overlaps_in_time(b):
                assert not a.overlaps_in_space(b), (key, a, other, b)
    static = [b for b in plan.buffers.values() if b.static]
    assert max(b.offset + b.nbytes for b in static) <= plan.static_bytes
    assert all(b.offset >= plan.static_bytes for b in plan.buffers.values() if not b.static)


def test_a_packed_hand_over_is_read_where_it_was_stored(model):
    index = {s.node.outputs[0]: i for i, s in enumerate(model.steps)}
    c1, c2, add = index["c1"], index["c2"], index["r"]
    device = model.device
    out_c1 = device.programs[c1].region("out").offset
    assert device.programs[c2].region("data").offset == out_c1
    assert device.programs[add].region("a").offset == out_c1
    assert device.programs[add].region("b").offset == device.programs[c2].region("out").offset
    assert device.plan.aliased[c2] == {"data"} and device.plan.aliased[add] == {"a", "b"}
    assert not device.plan.aliased[c1]  # the host packs the graph's input
    lives = device.plan.buffers[device.plan.regions[c1]["out"]]
    assert (lives.first, lives.last) == (c1, add)  # live until its last reader


def test_the_arena_is_smaller_than_the_programs_images_side_by_side(model):
    device = model.device
    assert device.per_step_peak_bytes < device.arena_bytes < device.per_step_total_bytes
    assert device.plan.static_bytes < device.arena_bytes
