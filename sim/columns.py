"""Instructions as numpy columns, and the checks on them that need no tensor data.

Decoding is vectorized over the whole program (one shift-and-mask per field, from the layouts
of `hw.isa.layouts`), so a long program costs microseconds per field, not a Python object per
instruction.  The checks find what fsim refuses in malformed instructions without running them
(token flags, memory types, SRAM and DRAM ranges, micro-op ranges), with fsim's messages:
`sim.validate` runs them before every backend, and the timing model (`sim.timing.decode`, which
re-exports them) reads the same columns.  Kept apart from `sim.timing`, whose package imports
the timing and rtl backends: a first fsim run need not load them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program
from sim.backend import InvalidProgramError

_LOAD, _STORE, _GEMM, _ALU = (int(o) for o in (isa.Opcode.LOAD, isa.Opcode.STORE, isa.Opcode.GEMM,
                                              isa.Opcode.ALU))


@dataclass(frozen=True)
class Columns:
    """Every field of every instruction, one int64 array per field name."""

    count: int
    values: dict[str, np.ndarray]
    words: np.ndarray  # (N, 2) uint64, as encoded

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]


# The fields the model, the counters and the checks read (GEMM and ALU share their loop fields).
_NEEDED = ("opcode", "pop_prev", "pop_next", "push_prev", "push_next", "memory_type", "sram_base",
           "dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1",
           "reset", "uop_bgn", "uop_end", "iter_out", "iter_in")


@functools.lru_cache(maxsize=64)
def _plan(cfg: AcceleratorConfig) -> tuple[tuple[str, int, np.uint64, np.uint64], ...]:
    """(name, word, shift, mask) of each needed field, from the layouts of `cfg`."""
    fields = {}
    for layout in ("mem", "gemm"):
        for f in isa.layouts(cfg)[layout].fields:
            if f.name in _NEEDED and f.name not in fields:
                assert not f.signed
                shift, mask = np.uint64(f.offset % isa.WORD_BITS), np.uint64((1 << f.width) - 1)
                fields[f.name] = (f.name, f.offset // isa.WORD_BITS, shift, mask)
    return tuple(fields[name] for name in _NEEDED)


def columns(program: Program, cfg: AcceleratorConfig) -> Columns:
    words = np.asarray(program.insns, dtype=np.uint64).reshape(-1, 2)
    halves = (words[:, 0], words[:, 1])
    values = {name: ((halves[w] >> shift) & mask).astype(np.int64) for name, w, shift, mask in _plan(cfg)}
    return Columns(len(words), values, words)


@functools.lru_cache(maxsize=64)
def sizes(cfg: AcceleratorConfig) -> dict[str, np.ndarray]:
    """Per memory type (indexed by its number, 0..7): element bytes and SRAM depth."""
    elem, depth = np.ones(8, dtype=np.int64), np.ones(8, dtype=np.int64)
    for m in isa.MemType:
        sram = isa.MemType.ACC if m == isa.MemType.ACC_8BIT else m
        elem[m], depth[m] = cfg.elem_bytes(m), cfg.depth(sram)
    return {"elem": elem, "depth": depth}


@functools.lru_cache(maxsize=64)
def _reserved(cfg: AcceleratorConfig) -> tuple[np.ndarray, np.ndarray]:
    """(low word, high word) masks of the reserved bits, indexed by opcode (0 for unknown ones)."""
    lo, hi = np.zeros(8, dtype=np.uint64), np.zeros(8, dtype=np.uint64)
    for op in isa.Opcode:
        mask = isa.reserved_mask(cfg, int(op))
        lo[op], hi[op] = mask & ((1 << isa.WORD_BITS) - 1), mask >> isa.WORD_BITS
    return lo, hi


def check_encoding(c: Columns, cfg: AcceleratorConfig) -> None:
    """What fsim's decoder rejects: unknown opcodes and memory types, reserved bits set, token
    flags towards a module that does not exist (the messages of hw.isa)."""
    op, mt = c["opcode"], c["memory_type"]
    bad = _first(op > max(isa.Opcode))
    mem = (op == _LOAD) | (op == _STORE)
    lo, hi = _reserved(cfg)
    known_op = np.minimum(op, 7)
    reserved = ((c.words[:, 0] & lo[known_op]) | (c.words[:, 1] & hi[known_op])) != 0
    bad_res = _first(reserved & (op <= max(isa.Opcode)))
    bad_mt = _first(mem & (mt > max(isa.MemType)) & ~reserved)
    errors = []
    if bad is not None:
        errors.append((bad, 0, f"unknown opcode {op[bad]} in instruction word {_word(c, bad)}"))
    if bad_res is not None:
        word = int(c.words[bad_res, 0]) | (int(c.words[bad_res, 1]) << isa.WORD_BITS)
        bits = word & isa.reserved_mask(cfg, int(op[bad_res]))
        errors.append((bad_res, 1, f"{isa.Opcode(int(op[bad_res])).name} sets reserved bits "
                                   f"{bits:#034x} in instruction word {word:#034x}"))
    if bad_mt is not None:
        name = isa.Opcode(int(op[bad_mt])).name.capitalize()
        errors.append((bad_mt, 2, f"{name} has unknown memory_type {mt[bad_mt]} in instruction word "
                                  f"{_word(c, bad_mt)}"))
    f = isa.layouts(cfg)["alu"]["alu_opcode"]
    alu_op = (c.words[:, f.offset // isa.WORD_BITS] >> np.uint64(f.offset % isa.WORD_BITS)) \
        & np.uint64((1 << f.width) - 1)
    bad_alu = _first((op == _ALU) & (alu_op > max(isa.AluOp)) & ~reserved)
    if bad_alu is not None:
        errors.append((bad_alu, 2, f"Alu has unknown alu_opcode {alu_op[bad_alu]} in instruction "
                                   f"word {_word(c, bad_alu)}"))
    to_load = (op == _LOAD) & ((mt == isa.MemType.INP) | (mt == isa.MemType.WGT))
    for module, flags, sel in ((isa.Module.LOAD, ("pop_prev", "push_prev"), to_load),
                               (isa.Module.STORE, ("pop_next", "push_next"), op == _STORE)):
        for flag in flags:
            i = _first(sel & (c[flag] != 0) & ~reserved)
            if i is not None:
                side = "before" if flag.endswith("prev") else "after"
                who = module.name.lower()
                errors.append((i, 3, f"{isa.Opcode(int(op[i])).name} on the {who} module sets "
                                     f"{flag}, but no module comes {side} {who}"))
    if errors:
        index, _, text = min(errors)
        raise InvalidProgramError(f"instruction #{index}: {text}")


def _word(c: Columns, i: int) -> str:
    return f"{int(c.words[i, 0]) | (int(c.words[i, 1]) << isa.WORD_BITS):#034x}"


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def problems(c: Columns, cfg: AcceleratorConfig, dram_bytes: int) -> list[tuple[int, str]]:
    """(instruction, message) of the first instruction breaking each rule that needs no data."""
    op, mt, x = c["opcode"], c["memory_type"], c["x_size"]
    found: list[tuple[int, str]] = []

    def add(mask: np.ndarray, text: Callable[[int], str]) -> None:
        i = _first(mask)
        if i is not None:
            found.append((i, text(i)))

    real_load, real_store = (op == _LOAD) & (x != 0), (op == _STORE) & (x != 0)
    known = mt <= max(isa.MemType)
    add(real_load & (mt == isa.MemType.OUT),
        lambda i: "LOAD into the OUT buffer is not an instruction (STORE reads it)")
    add(real_store & (mt != isa.MemType.OUT) & known,
        lambda i: f"STORE must read the OUT buffer, not {isa.MemType(int(mt[i])).name}")
    pads = c["y_pad_0"] | c["y_pad_1"] | c["x_pad_0"] | c["x_pad_1"]
    add(real_store & (mt == isa.MemType.OUT) & (pads != 0),
        lambda i: "STORE cannot pad: all four pad fields must be 0")
    loop = (op == _GEMM) | (op == _ALU)
    add((op == _ALU) & (c["reset"] != 0), lambda i: "ALU instructions cannot set reset")
    add(loop & (c["uop_end"] < c["uop_bgn"]),
        lambda i: f"uop_end {c['uop_end'][i]} is before uop_bgn {c['uop_bgn'][i]}")
    add(loop & (c["uop_end"] >= c["uop_bgn"]) & (c["uop_end"] > cfg.uop_depth),
        lambda i: f"uop_end {c['uop_end'][i]} is outside the UOP buffer of {cfg.uop_depth} micro-ops")
    _ranges(c, cfg, dram_bytes, real_load & known & (mt != isa.MemType.OUT), real_store, add)
    return found


def _ranges(c: Columns, cfg: AcceleratorConfig, dram_bytes: int, loads: np.ndarray,
            stores: np.ndarray, add: Callable) -> None:  # type: ignore[type-arg]
    mt = c["memory_type"]
    t = sizes(cfg)
    elem, depth = t["elem"][mt], t["depth"][mt]
    rows_ = c["y_pad_0"] + c["y_size"] + c["y_pad_1"]
    row = c["x_pad_0"] + c["x_size"] + c["x_pad_1"]
    sram_hi = c["sram_base"] + np.where(loads, rows_ * row, c["y_size"] * c["x_size"]) - 1
    names = {int(m): (isa.MemType.ACC if m == isa.MemType.ACC_8BIT else m).name for m in isa.MemType}
    add(loads & (sram_hi >= depth),
        lambda i: f"LOAD reaches {names[int(mt[i])]} index {sram_hi[i]}, outside the "
        f"{names[int(mt[i])]} buffer of {depth[i]} elements")
    add(stores & (sram_hi >= depth),
        lambda i: f"STORE reaches OUT index {sram_hi[i]}, outside the OUT buffer of {depth[i]} elements")
    last = c["dram_base"] + (c["y_size"] - 1) * c["x_stride"] + c["x_size"] - 1
    end = (last + 1) * elem
    add((loads | stores) & (c["y_size"] > 0) & (end > dram_bytes),
        lambda i: f"DRAM access up to byte {end[i] - 1} (element {last[i]} of {elem[i]} bytes) "
        f"is outside the {dram_bytes}-byte DRAM")
