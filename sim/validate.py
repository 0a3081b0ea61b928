"""The checks every backend runs on a Program before it simulates anything.

fsim defines the ISA, but it found a malformed instruction only when (and if) it executed it,
while the timing model and the RTL had checks of their own or none: the three disagreed on
malformed programs.  `check_program` is the one definition they all call first, so a program
is refused by each of them with the same SimulationError naming the same instruction, the
lowest-numbered one that breaks a rule:

* decoding: unknown opcodes and memory types, reserved bits set, token flags towards a module
  that does not exist;
* ranges without data: SRAM windows of LOAD and STORE, DRAM windows (so no address wraps past
  4 GiB on a 32-bit bus), micro-op ranges, STORE from another buffer, padding on STORE, LOAD
  into OUT, reset on ALU;
* the micro-op table: a LOAD UOP reads only the program's micro-op table and no STORE writes
  the table or the instructions, so the micro-ops every GEMM and ALU runs are known before the
  run; their dst, src and wgt indices, moved by the loops, stay inside their buffers;
* limits (`sim.limits`): micro-op iterations per instruction and per program;
* the token protocol (`hw.program.verify_tokens`): FINISH last, tokens balanced, no dependency
  cycle, LOADs and STOREs ordered before FINISH.  With it no valid program deadlocks on tokens
  or lets FINISH retire early, outcomes that fsim's schedule and the hardware's timing could
  otherwise reach differently.

The errors are `InvalidProgramError` (a SimulationError).  Each backend still detects at run
time what it can (a deadlock of its own queues, a run past its cycle limit).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.memo import Memo
from hw.program import (
    Program,
    ProgramError,
    Region,
    Signature,
    token_signature,
    tokens_verified,
    verify_signatures,
)
from sim.backend import InvalidProgramError
from sim.columns import Columns, check_encoding, columns, problems
from sim.limits import DEFAULT_LIMITS, Limits
from sim.scratchpads import range_problem

Problem = tuple[int, str]

_LOAD, _STORE, _GEMM, _FINISH, _ALU = (int(o) for o in (isa.Opcode.LOAD, isa.Opcode.STORE,
                                                        isa.Opcode.GEMM, isa.Opcode.FINISH,
                                                        isa.Opcode.ALU))


_PASSED: weakref.WeakKeyDictionary[Program, set[tuple[str, Limits]]] = weakref.WeakKeyDictionary()


def check_program(program: Program, cfg: AcceleratorConfig, limits: Limits = DEFAULT_LIMITS,
                  cols: Columns | None = None) -> None:
    """Raise InvalidProgramError for the first instruction of `program` that breaks a rule
    above.  A Program is immutable: one that passed for a config and limits is not checked again
    (a model runs each of its Programs once per input).  `cols`: the program's decoded columns
    (`sim.columns.columns`) where the caller has them already."""
    key = (cfg.fingerprint(), limits)
    if key in _PASSED.get(program, ()):
        return
    _check(program, cfg, limits, cols)
    _PASSED.setdefault(program, set()).add(key)


def mark_passed(program: Program, cfg: AcceleratorConfig, limits: Limits) -> None:
    """Take `program` as passed for `cfg` and `limits`: an earlier process checked it (fsim's
    record of its run kept on disk, `sim.run_cache`, whose key covers everything read here)."""
    _PASSED.setdefault(program, set()).add((cfg.fingerprint(), limits))


def _check(program: Program, cfg: AcceleratorConfig, limits: Limits, cols: Columns | None) -> None:
    if cols is None:
        cols = columns(program, cfg)
    check_encoding(cols, cfg)
    found = problems(cols, cfg, program.dram_bytes)
    found += _table_problems(cols, cfg, program)
    found += _limit_problems(cols, limits)
    first = min(index for index, _ in found) if found else cols.count
    found += _uop_problems(cols, cfg, program, first)
    if found:
        index, text = min(found, key=lambda item: item[0])
        raise InvalidProgramError(f"instruction #{index} ({describe(program, cfg, index)}): {text}")
    _check_tokens(program, cfg, cols)


def _check_tokens(program: Program, cfg: AcceleratorConfig, cols: Columns) -> None:
    """The static token protocol of `hw.program.verify_tokens`: FINISH last, every token pushed
    popped, no dependency cycle (a certain deadlock), every LOAD and STORE ordered before FINISH
    (else FINISH may retire first, and whether it does depends on timing, so the backends could
    not agree).  A Program the builder verified already (`hw.program.tokens_verified`) is not
    verified again: in a sweep this check was a fifth of each point's time.  The signatures come
    from the columns, one decoded instruction per kind (`check_encoding` passed: the token flags
    are legal)."""
    capacity = (1 << cfg.token_counter_bits) - 1
    if tokens_verified(program, capacity):
        return
    decode = isa.decoder(cfg)

    def insn(index: int) -> isa.Insn:
        return decode(int(cols.words[index, 0]) | (int(cols.words[index, 1]) << isa.WORD_BITS))

    try:
        if not cols.count or cols["opcode"][-1] != _FINISH:
            raise ProgramError("program does not end with FINISH")
        kind = _kinds(cols)
        key = (capacity, kind.tobytes())  # what the verdict depends on
        if key in _TOKENS_PASSED:
            return
        verify_signatures(_signatures(kind, insn), capacity, lambda i: isa.format_insn(insn(i)))
    except ProgramError as exc:
        raise InvalidProgramError(f"token protocol: {exc}") from None
    _TOKENS_PASSED.keep(key, True)


# Token protocols verified in this process, by counter capacity and kinds (`_kinds`): a model's
# Programs of one layer shape differ in their addresses, not in their tokens.
_TOKENS_PASSED: Memo[tuple[int, bytes], bool] = Memo(1024)


def _kinds(cols: Columns) -> np.ndarray:
    """Per instruction, what its `hw.program.token_signature` depends on: the opcode, the memory
    type (LOAD and STORE) and the four flags, as one integer."""
    c = cols
    op = c["opcode"]
    kind = op * 8 + np.where((op == _LOAD) | (op == _STORE), c["memory_type"], 0)
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        kind = kind * 2 + c[flag]
    return np.asarray(kind, dtype=np.int64)


def _signatures(kind: np.ndarray, insn: Callable[[int], isa.Insn]) -> list[Signature]:
    """`hw.program.token_signature` of every instruction: they depend only on its kind
    (`_kinds`), so one instruction of each kind is decoded."""
    _, first, inverse = np.unique(kind, return_index=True, return_inverse=True)
    found = [token_signature(insn(int(i))) for i in first]
    return [found[k] for k in inverse.reshape(-1).tolist()]


def check_cycles(program: Program, cfg: AcceleratorConfig, max_cycles: int, backend: str,
                 uops: int | None = None) -> None:
    """Refuse before running a program that cannot finish within `max_cycles`: the compute
    module runs at most one micro-op per cycle, so it needs at least as many cycles as it has
    micro-op iterations (`uops`, counted here when not given)."""
    needed = int(iterations(columns(program, cfg)).sum()) if uops is None else uops
    if needed > max_cycles:
        raise InvalidProgramError(
            f"{backend}: the program runs {needed} micro-op iterations, so it needs at least "
            f"{needed} cycles, more than max_cycles={max_cycles}")


def describe(program: Program, cfg: AcceleratorConfig, index: int) -> str:
    lo, hi = (int(w) for w in program.insns[index])
    try:
        return isa.format_insn(isa.decode_insn(lo | (hi << isa.WORD_BITS), cfg))
    except isa.EncodingError:
        return f"word {lo | (hi << isa.WORD_BITS):#034x}"


def _dram_bytes(cols: Columns, elem: int) -> tuple[np.ndarray, np.ndarray]:
    """[first, end) DRAM bytes of every LOAD/STORE window (empty when x or y is 0)."""
    c = cols
    first = c["dram_base"] * elem
    last = c["dram_base"] + (c["y_size"] - 1) * c["x_stride"] + c["x_size"]
    end: np.ndarray = np.where((c["x_size"] > 0) & (c["y_size"] > 0), last * elem, first)
    return first, end


def _region(program: Program, role: str) -> Region | None:
    found = program.regions_with_role(role)
    return found[0] if found else None


def _table_problems(cols: Columns, cfg: AcceleratorConfig, program: Program) -> list[Problem]:
    """A LOAD UOP outside the micro-op table; a STORE over the table or the instructions."""
    c = cols
    op, mt = c["opcode"], c["memory_type"]
    moves = (c["x_size"] > 0) & (c["y_size"] > 0)
    found: list[Problem] = []
    uop_elem = cfg.elem_bytes(isa.MemType.UOP)
    first, end = _dram_bytes(c, uop_elem)
    table = _region(program, "uops")
    lo, hi = (table.offset, table.offset + table.nbytes) if table else (0, 0)
    bad = np.flatnonzero((op == _LOAD) & (mt == isa.MemType.UOP) & moves & ((first < lo) | (end > hi)))
    if bad.size:
        i = int(bad[0])
        where = f"bytes {lo}..{hi - 1}" if table else "none: the program has no micro-op table"
        found.append((i, f"LOAD UOP reads DRAM bytes {first[i]}..{end[i] - 1}, outside the program's "
                         f"micro-op table ({where})"))
    first, end = _dram_bytes(c, cfg.out_elem_bytes)
    for role, what in (("uops", "micro-op table"), ("insns", "instructions")):
        region = _region(program, role)
        if region is None:
            continue
        r_lo, r_hi = region.offset, region.offset + region.nbytes
        bad = np.flatnonzero((op == _STORE) & moves & (first < r_hi) & (end > r_lo))
        if bad.size:
            i = int(bad[0])
            found.append((i, f"STORE writes DRAM bytes {first[i]}..{end[i] - 1}, over the program's "
                             f"{what} (bytes {r_lo}..{r_hi - 1})"))
    return found


def iterations(cols: Columns) -> np.ndarray:
    """Micro-op iterations of each instruction (0 but for GEMM and ALU; reset GEMMs count)."""
    c = cols
    loop = (c["opcode"] == _GEMM) | (c["opcode"] == _ALU)
    per = c["iter_out"] * c["iter_in"] * np.maximum(c["uop_end"] - c["uop_bgn"], 0)
    return np.where(loop, per, 0)


def _limit_problems(cols: Columns, limits: Limits) -> list[Problem]:
    per = iterations(cols)
    found: list[Problem] = []
    over = np.flatnonzero(per > limits.insn_uops)
    if over.size:
        i = int(over[0])
        found.append((i, f"runs {per[i]} micro-op iterations, more than the limit of "
                         f"{limits.insn_uops} per instruction (sim.limits.Limits.insn_uops)"))
    total = np.cumsum(per)
    over = np.flatnonzero(total > limits.program_uops)
    if over.size:
        i = int(over[0])
        found.append((i, f"brings the program to {total[i]} micro-op iterations, more than the "
                         f"limit of {limits.program_uops} (sim.limits.Limits.program_uops)"))
    return found


def _uop_problems(cols: Columns, cfg: AcceleratorConfig, program: Program, stop: int) -> list[Problem]:
    """Walk the compute module's instructions before `stop` in program order (the order it runs
    them), following the micro-op buffer through its LOADs; the first GEMM or ALU whose
    micro-ops, moved by its loops, leave a buffer."""
    c = cols
    op, mt = c["opcode"], c["memory_type"]
    uop_load = (op == _LOAD) & (mt == isa.MemType.UOP) & (c["x_size"] > 0)
    work = np.flatnonzero((uop_load | (((op == _GEMM) | (op == _ALU)) & (iterations(c) > 0)))
                          [:stop])
    if not work.size:
        return []
    buffer = np.zeros(cfg.uop_depth, dtype=np.uint64)
    fields = isa.decode_uops(buffer, cfg)  # the buffer's micro-ops, decoded as LOADs change them
    table = _table_words(program, cfg)
    seen: dict[tuple[int, int], str | None] = {}  # verdicts since the last LOAD UOP
    verdicts = _loop_verdicts(cfg)
    decode = isa.decoder(cfg)
    words = c.words[work].tolist()
    for i, (lo, hi) in zip(work.tolist(), words, strict=True):
        key = (lo, hi)
        if key in seen:
            text = seen[key]
        else:
            insn = decode(lo | (hi << isa.WORD_BITS))
            if isinstance(insn, isa.Load):
                window = _load_uops(insn, buffer, table)
                for name, values in isa.decode_uops(buffer[window], cfg).items():
                    fields[name][window] = values
                seen.clear()
                continue
            assert isinstance(insn, isa.Gemm | isa.Alu)  # (the walk holds those and LOAD UOPs)
            known = (lo, hi, buffer[insn.uop_bgn : insn.uop_end].tobytes())  # what it reads
            if known in verdicts:
                text = seen[key] = verdicts[known]
            else:
                text = seen[key] = verdicts.keep(known, loop_problem(cfg, insn, fields))
        if text:
            return [(i, text)]
    return []


_VERDICTS_MAX = 1 << 12


@functools.lru_cache(maxsize=16)
def _loop_verdicts(cfg: AcceleratorConfig) -> Memo[tuple[int, int, bytes], str | None]:
    """`loop_problem`'s verdicts in this process, by instruction word and the micro-op words it
    reads (a model's Programs repeat micro-op tables and the GEMM and ALU words over them)."""
    return Memo(_VERDICTS_MAX)


def _table_words(program: Program, cfg: AcceleratorConfig) -> tuple[int, np.ndarray]:
    """(first element address, words) of the micro-op table."""
    table = _region(program, "uops")
    if table is None:
        return 0, np.zeros(0, dtype=np.uint64)
    words = np.asarray(program.constants.get(table.name, np.zeros(table.shape, table.dtype)))
    return table.offset // cfg.elem_bytes(isa.MemType.UOP), words.astype(np.uint64).reshape(-1)


def _load_uops(insn: isa.Load, buffer: np.ndarray, table: tuple[int, np.ndarray]) -> slice:
    """fsim's LOAD UOP (padding writes zeros) on `buffer`, from the table (already checked);
    the window of `buffer` it wrote."""
    start, words = table
    rows = np.arange(insn.y_size)[:, None] * insn.x_stride + np.arange(insn.x_size)[None, :]
    data = words[insn.dram_base - start + rows]
    tile = np.zeros((insn.y_pad_0 + insn.y_size + insn.y_pad_1, insn.row_elems), dtype=np.uint64)
    tile[insn.y_pad_0 : insn.y_pad_0 + insn.y_size, insn.x_pad_0 : insn.x_pad_0 + insn.x_size] = data
    window = slice(insn.sram_base, insn.sram_base + insn.sram_elems)
    buffer[window] = tile.reshape(-1)
    return window


def loop_problem(cfg: AcceleratorConfig, insn: isa.Gemm | isa.Alu,
                 uops: dict[str, np.ndarray]) -> str | None:
    """What fsim refuses in `insn`'s micro-ops (`uops`: the micro-op SRAM's fields, decoded by
    `isa.decode_uops`), if anything: an index moved by the loops past the end of its buffer
    (fsim's order of checks)."""
    name = "GEMM" if isinstance(insn, isa.Gemm) else "ALU"
    checks: list[tuple[str, isa.MemType]] = [("dst", isa.MemType.ACC)]
    if name == "ALU":
        checks.append(("src", isa.MemType.ACC))
    elif not insn.reset:
        checks += [("src", isa.MemType.INP), ("wgt", isa.MemType.WGT)]
    for field, memory in checks:
        reach = (insn.iter_out - 1) * getattr(insn, f"{field}_factor_out")
        reach += (insn.iter_in - 1) * getattr(insn, f"{field}_factor_in")
        values = uops[field][insn.uop_bgn : insn.uop_end].tolist()  # a few: faster than numpy's
        text = range_problem(cfg, memory, f"{name} {field} index", min(values), max(values) + reach)
        if text:
            return text
    return None

