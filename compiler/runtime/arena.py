"""The device DRAM arena of a compiled model: every accelerator step's Program relocated into one
DRAM image.

The arena has two parts.  The static part holds what never changes between steps or runs --
each step's instructions, micro-ops and constants (weights, biases, multipliers) -- placed once,
back to back.  The activation part holds the packed activations the steps read and write; a
buffer is live from the step that writes it (the host packing an input, or a step storing its
output) to the last step that reads it, and buffers whose lifetimes do not overlap share space
(first fit, largest first, as `compiler.graph.memory` plans the host arena).  A step that reads
a predecessor's packed output in the same layout reads it where the predecessor stored it: its
input region is the predecessor's output region, so the hand-over costs no copy.

Every offset is a multiple of `align_bytes`: a 4 KiB page, which is a multiple of every memory
type's element size and of the bus word.  Programs place their regions on pages too
(`hw.program.REGION_ALIGN_BYTES`), so a relocated DMA moves by whole pages: it addresses the same
elements, the same bus words and the same offsets within a page, and takes exactly the bursts it
took in its own image (bursts end at 4 KiB boundaries): a step costs the same cycles alone and in
the model, which is what lets a sweep measure layers one by one.

`relocate` is the operation under the plan: the same Program with its regions at new offsets,
every LOAD and STORE address moved with the region it points into.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import REGION_ALIGN_BYTES, Program, ProgramError, Region

STATIC_ROLES = ("insns", "uops", "constant")


def align_bytes(cfg: AcceleratorConfig) -> int:
    """The alignment of every arena offset: the least common multiple of the programs' region
    alignment (a 4 KiB page: a region keeps its offset within a page, so its bursts, cut at page
    boundaries, stay those of the step's own image), all memory types' element sizes and the bus
    word (all powers of two: their largest)."""
    return math.lcm(REGION_ALIGN_BYTES, cfg.bus_bytes, *(cfg.elem_bytes(m) for m in isa.MemType))


def relocate(program: Program, offsets: Mapping[str, int], cfg: AcceleratorConfig,
             dram_bytes: int) -> Program:
    """`program` with each region named in `offsets` moved to that byte offset (the others stay)
    in a DRAM of `dram_bytes`: every LOAD and STORE (micro-op loads included) addresses its
    region at the new place.  Raises ProgramError when a region would leave the DRAM, when a
    region moves by a distance that is not a whole number of the elements that address it, or
    when a DMA address lies in no region."""
    program.check_config(cfg)
    unknown = sorted(set(offsets) - {r.name for r in program.regions})
    if unknown:
        names = ", ".join(r.name for r in program.regions)
        raise ProgramError(f"cannot relocate regions {unknown}: the program has {names}")
    moved = tuple(replace(r, offset=int(offsets.get(r.name, r.offset))) for r in program.regions)
    for r in moved:
        if r.offset < 0 or r.offset + r.nbytes > dram_bytes:
            raise ProgramError(f"region {r.name!r} at offset {r.offset} ({r.nbytes} bytes) does not fit "
                               f"a {dram_bytes}-byte DRAM")
    insns = _relocate_insns(program, moved, cfg)
    return Program(program.fingerprint, insns, moved, program.constants, dram_bytes, program.config_name)


def _relocate_insns(program: Program, moved: tuple[Region, ...], cfg: AcceleratorConfig) -> np.ndarray:
    """The instruction words with DMA addresses moved; each distinct word is decoded once."""
    words = np.asarray(program.insns, dtype=np.uint64).reshape(-1, 2)
    if not len(words):
        return words.copy()
    distinct, first, inverse = np.unique(words, axis=0, return_index=True, return_inverse=True)
    finder = _RegionFinder(program.regions, moved)
    out = []
    for (lo, hi), index in zip(distinct.tolist(), first.tolist(), strict=True):
        insn = isa.decode_insn(lo | (hi << isa.WORD_BITS), cfg)
        out.append(_relocate_one(insn, int(index), finder, cfg))
    try:
        encoded = isa.encode(out, cfg)
    except isa.EncodingError as exc:
        raise ProgramError(f"relocated program does not encode: {exc}") from None
    return np.ascontiguousarray(encoded[np.asarray(inverse).reshape(-1)])


class _RegionFinder:
    """The region holding a byte address, and where that region moves."""

    def __init__(self, old: tuple[Region, ...], new: tuple[Region, ...]) -> None:
        pairs = sorted(((o, n) for o, n in zip(old, new, strict=True) if o.nbytes), key=lambda p: p[0].offset)
        self.pairs = pairs
        self.starts = [o.offset for o, _ in pairs]

    def find(self, address: int) -> tuple[Region, Region] | None:
        i = bisect.bisect_right(self.starts, address) - 1
        if i < 0:
            return None
        old, new = self.pairs[i]
        return (old, new) if address < old.offset + old.nbytes else None


def _relocate_one(insn: isa.Insn, index: int, finder: _RegionFinder, cfg: AcceleratorConfig) -> isa.Insn:
    """`insn` addressing its region's new place (instructions that move no data are unchanged)."""
    if not isinstance(insn, isa.MemInsn) or insn.x_size == 0 or insn.y_size == 0:
        return insn
    elem_bytes = cfg.elem_bytes(insn.memory_type)
    address = insn.dram_base * elem_bytes
    found = finder.find(address)
    if found is None:
        raise ProgramError(f"instruction #{index} ({isa.format_insn(insn)}): DMA address {address} "
                           "lies in no region of the program")
    old, new = found
    delta = new.offset - old.offset
    if delta % elem_bytes:
        raise ProgramError(f"region {old.name!r} cannot move from offset {old.offset} to {new.offset}: "
                           f"{delta} bytes is not a multiple of the {elem_bytes}-byte "
                           f"{insn.memory_type.name} elements that address it")
    return isa.with_fields(insn, dram_base=insn.dram_base + delta // elem_bytes) if delta else insn


# -- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccelUse:
    """What the plan needs of one accelerator step: its position among the model's steps, its
    Program, the region names that hold constants, and for each activation region the value it
    holds and whether it may alias a predecessor's output (same packed layout)."""

    index: int
    program: Program
    constants: frozenset[str]
    activations: tuple[tuple[str, str, tuple[int, int, int]], ...]  # (region, value, layout)
    output: tuple[str, str, tuple[int, int, int]]  # ("out", value, layout)


@dataclass(frozen=True)
class Buffer:
    """A byte range of the arena, live from step `first` to step `last` (static: always)."""

    offset: int
    nbytes: int
    first: int
    last: int
    static: bool = False

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.static or other.static or (self.first <= other.last and other.first <= self.last)

    def overlaps_in_space(self, other: Buffer) -> bool:
        return self.offset < other.offset + other.nbytes and other.offset < self.offset + self.nbytes


@dataclass
class ArenaPlan:
    """Where each step's regions live: `regions[index][name]` is a key of `buffers`."""

    align_bytes: int
    static_bytes: int
    arena_bytes: int
    buffers: dict[str, Buffer]
    regions: dict[int, dict[str, str]]
    aliased: dict[int, set[str]]  # per step: the input regions that are a predecessor's output

    def offsets(self, index: int) -> dict[str, int]:
        """Byte offset of every region of step `index`."""
        return {name: self.buffers[key].offset for name, key in self.regions[index].items()}


def plan_arena(uses: Sequence[AccelUse], cfg: AcceleratorConfig) -> ArenaPlan:
    """The arena of these accelerator steps (in run order): static regions first, then the
    activations with lifetime-based reuse and in-place hand-overs (see the module doc)."""
    align = align_bytes(cfg)
    regions: dict[int, dict[str, str]] = {u.index: {} for u in uses}
    buffers: dict[str, Buffer] = {}
    static = 0
    for u in uses:
        for r in u.program.regions:
            if r.role in STATIC_ROLES or r.name in u.constants:
                key = f"{u.index}/{r.name}"
                buffers[key] = Buffer(static, r.nbytes, 0, 0, static=True)
                regions[u.index][r.name] = key
                static += _aligned(r.nbytes, align)
    lives, aliased = _activation_lives(uses, regions, align)
    placed = _first_fit(lives, static)
    buffers.update(placed)
    end = max((b.offset + b.nbytes for b in buffers.values()), default=0)
    return ArenaPlan(align, static, _aligned(max(end, static), align), buffers, regions, aliased)


def _activation_lives(uses: Sequence[AccelUse], regions: dict[int, dict[str, str]],
                      align: int) -> tuple[dict[str, tuple[int, int, int]], dict[int, set[str]]]:
    """(aligned bytes, first step, last step) of every activation buffer, the steps' regions
    pointed at them, and the input regions each step reads in place."""
    lives: dict[str, tuple[int, int, int]] = {}
    produced: dict[str, tuple[str, tuple[int, int, int], int]] = {}  # value -> (key, layout, bytes)
    aliased: dict[int, set[str]] = {u.index: set() for u in uses}
    for u in uses:
        for region, value, layout in u.activations:
            nbytes = u.program.region(region).nbytes
            have = produced.get(value)
            if have is not None and have[1] == layout and have[2] == nbytes:
                size, first, _ = lives[have[0]]
                lives[have[0]] = (size, first, u.index)
                regions[u.index][region] = have[0]
                aliased[u.index].add(region)
            else:
                key = f"{u.index}/{region}"
                lives[key] = (_aligned(nbytes, align), u.index, u.index)
                regions[u.index][region] = key
        for r in u.program.regions:
            if r.name not in regions[u.index]:  # the output, and any scratch
                key = f"{u.index}/{r.name}"
                lives[key] = (_aligned(r.nbytes, align), u.index, u.index)
                regions[u.index][r.name] = key
        region, value, layout = u.output
        produced[value] = (regions[u.index][region], layout, u.program.region(region).nbytes)
    return lives, aliased


def _first_fit(lives: Mapping[str, tuple[int, int, int]], base: int) -> dict[str, Buffer]:
    """Buffers placed largest first, each at the lowest offset from `base` that no buffer live
    at the same time covers (sizes are aligned, so offsets stay aligned)."""
    placed: dict[str, Buffer] = {}
    for key in sorted(lives, key=lambda k: (-lives[k][0], lives[k][1], k)):
        size, first, last = lives[key]
        want = Buffer(0, size, first, last)
        busy = sorted((b.offset, b.offset + b.nbytes) for b in placed.values() if b.overlaps_in_time(want))
        offset = base
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed[key] = Buffer(offset, size, first, last)
    return placed


def _aligned(nbytes: int, align: int) -> int:
    return max(align, -(-nbytes // align) * align)


# -- the arena in use -------------------------------------------------------------------------


class DeviceArena:
    """The plan of a model's accelerator steps with their relocated Programs and the image of
    the static part (written once into each run's DRAM)."""

    def __init__(self, uses: Sequence[AccelUse], cfg: AcceleratorConfig,
                 constants: Mapping[int, Mapping[str, np.ndarray]]) -> None:
        self.plan = plan_arena(uses, cfg)
        self.programs = {u.index: relocate(u.program, self.plan.offsets(u.index), cfg, self.plan.arena_bytes)
                         for u in uses}
        self.per_step_peak_bytes = max((u.program.dram_bytes for u in uses), default=0)
        self.per_step_total_bytes = sum(u.program.dram_bytes for u in uses)
        self.static_image = np.zeros(self.plan.static_bytes, np.uint8)
        for u in uses:  # instructions, micro-ops and constants: the activations are written per run
            self.programs[u.index].write_dram(self.static_image, constants.get(u.index, {}))
        self.static_image.setflags(write=False)

    @property
    def arena_bytes(self) -> int:
        return self.plan.arena_bytes


    def new_dram(self) -> np.ndarray:
        """A DRAM image for one run: the static part written, the activation part zero."""
        dram = np.zeros(self.plan.arena_bytes, np.uint8)
        dram[: self.plan.static_bytes] = self.static_image
        return dram

    def at(self, index: int) -> StepInArena:
        """Step `index`'s relocated program and regions."""
        return StepInArena(self.programs[index], frozenset(self.plan.aliased[index]))


@dataclass(frozen=True)
class StepInArena:
    """One accelerator step's relocated Program, and the input regions it reads in place."""

    program: Program
    aliased: frozenset[str]

    def in_place(self, region: str) -> bool:
        """Whether the step reads input `region` where a predecessor stored it."""
        return region in self.aliased

    def write(self, dram: np.ndarray, region: str, data: np.ndarray) -> None:
        self.program.region(region).write(dram, data)

    def read(self, dram: np.ndarray, region: str) -> np.ndarray:
        """Region `region` as an array viewing `dram` (no copy)."""
        return self.program.region(region).view(dram)
