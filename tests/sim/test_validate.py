"""sim.validate: every backend refuses a malformed Program before running it, with one message.

Each case is built by hand and run on fsim, the timing model and (with Verilator) the RTL; the
message must be the same on each.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS
from hw.errors import InputError
from hw.memo import Memo
from hw.program import Program, ProgramBuilder
from sim.backend import InvalidProgramError, SimulationError
from sim.backends import make_backend
from sim.fuzz import apply
from sim.limits import Limits

TINY = PRESETS["tiny"]
BACKENDS = ["fsim", "timing"] + (["rtl"] if shutil.which("verilator") else [])


def _gemm_program(*, uop: isa.Uop | None = None, iters: tuple[int, int] = (1, 1),
                  store_elem_offset: int = 0, store_to: str = "C") -> Program:
    """LOAD INP/WGT, one GEMM of micro-op `uop`, STORE: a valid program unless told otherwise."""
    uop = uop or isa.Uop(0, 0, 0)
    b = ProgramBuilder(TINY)
    a = b.region("A", (4, TINY.batch, TINY.block_in), np.int8, "input")
    w = b.region("W", (4, TINY.block_out, TINY.block_in), np.int8, "input")
    c = b.region("C", (4, TINY.batch, TINY.block_out), np.int8, "output")
    b.load(isa.MemType.INP, a, 0, y_size=1, x_size=4)
    b.load(isa.MemType.WGT, w, 0, y_size=1, x_size=4, push_next=True)
    b.load_uops(b.uops([uop]))
    b.gemm(reset=False, uop_bgn=0, uop_end=1, iter_out=iters[0], iter_in=iters[1], pop_prev=True,
           push_next=True)
    target = c if store_to == "C" else next(r for r in b._regions if r.name == store_to)
    b.store(target, 0, y_size=1, x_size=4, elem_offset=store_elem_offset, pop_prev=True,
            push_prev=True)
    b.finish(pop_next=True)
    return b.build()


def _inputs() -> dict[str, np.ndarray]:
    return {"A": np.ones((4, TINY.batch, TINY.block_in), np.int8),
            "W": np.ones((4, TINY.block_out, TINY.block_in), np.int8)}


def _refused(program: Program, match: str, **options: object) -> None:
    messages = set()
    for name in BACKENDS:
        with pytest.raises(InvalidProgramError, match=match) as info:
            make_backend(name, TINY, **options).run(program, _inputs())
        messages.add(str(info.value))
    assert len(messages) == 1, messages


def _with(program: Program, insn: int, name: str, value: int, layout: str = "mem") -> Program:
    f = isa.layouts(TINY)[layout][name]
    return apply(program, TINY, ({"kind": "bits", "insn": insn, "offset": f.offset, "width": f.width,
                                  "value": value},))


def test_a_valid_program_runs_on_every_backend():
    program = _gemm_program()
    for name in BACKENDS:
        assert make_backend(name, TINY).run(program, _inputs()).stats.gemm_uops == 1


def test_reserved_bits_are_refused():
    program = _gemm_program()
    finish = len(program.insns) - 1
    bad = apply(program, TINY, ({"kind": "bits", "insn": finish, "offset": 40, "width": 1,
                                 "value": 1},))
    _refused(bad, rf"^instruction #{finish}: FINISH sets reserved bits 0x0+10000000000 in "
                  r"instruction word 0x")
    assert isa.reserved_mask(TINY, int(isa.Opcode.LOAD)) >> 128 == 0


def test_unknown_alu_opcode_is_refused_by_the_validator_too():
    b = ProgramBuilder(TINY)
    b.load_uops(b.uops([isa.Uop(0, 0)]))
    b.alu(uop_bgn=0, uop_end=1, alu_opcode=isa.AluOp.ADD)
    b.finish()
    bad = _with(b.build(), 1, "alu_opcode", 7, "alu")
    _refused(bad, r"^instruction #1: Alu has unknown alu_opcode 7 in instruction word 0x")


def test_micro_op_indices_past_a_buffer_are_refused_before_running():
    src = TINY.inp_depth - 2  # moved by 2 iterations of factor 1: reaches inp_depth
    program = _gemm_program(uop=isa.Uop(0, src, 0), iters=(1, 3))
    bad = _with(program, 3, "src_factor_in", 1, "gemm")
    _refused(bad, rf"^instruction #3 \(GEMM uops=\[0,1\) .*\): GEMM src index reaches INP index "
                  rf"{TINY.inp_depth}, outside the INP buffer of {TINY.inp_depth} elements$")


def test_micro_op_table_must_hold_the_micro_ops():
    program = _gemm_program()
    table = program.regions_with_role("uops")[0]
    bad = _with(program, 2, "dram_base", 0)  # LOAD UOP from the input region
    _refused(bad, rf"^instruction #2 .*: LOAD UOP reads DRAM bytes 0..3, outside the program's "
                  rf"micro-op table \(bytes {table.offset}..{table.offset + table.nbytes - 1}\)$")


def test_a_store_may_not_overwrite_the_instructions():
    program = _gemm_program()
    insns = program.insn_region
    elem = TINY.out_elem_bytes
    bad = _with(program, 4, "dram_base", insns.offset // elem)
    _refused(bad, rf"^instruction #4 .*: STORE writes DRAM bytes {insns.offset}..\d+, over the "
                  rf"program's instructions \(bytes {insns.offset}..{insns.offset + insns.nbytes - 1}\)$")


def test_dram_addresses_past_4_gib_are_refused_not_wrapped():
    program = _gemm_program()
    elem = TINY.inp_elem_bytes
    wrapped = (1 << 32) // elem  # the byte address wraps to 0 on a 32-bit bus
    bad = _with(program, 0, "dram_base", wrapped)
    _refused(bad, rf"^instruction #0 .*: DRAM access up to byte {(wrapped + 4) * elem - 1} "
                  rf"\(element {wrapped + 3} of {elem} bytes\) is outside the \d+-byte DRAM$")


def test_token_protocol_is_checked_before_running():
    program = _gemm_program()
    truncated = apply(program, TINY, ({"kind": "truncate", "count": len(program.insns) - 1},))
    _refused(truncated, r"^token protocol: program does not end with FINISH$")


def test_loop_extents_past_the_limits_are_refused_before_any_work():
    program = _gemm_program(iters=(1, 1))
    huge = _with(_with(program, 3, "iter_out", (1 << 14) - 1, "gemm"), 3, "iter_in", (1 << 14) - 1, "gemm")
    _refused(huge, r"^instruction #3 .*: runs 268402689 micro-op iterations, more than the limit of "
                   r"16777216 per instruction \(sim.limits.Limits.insn_uops\)$")
    with pytest.raises(InvalidProgramError, match=r"brings the program to 3 micro-op iterations, more "
                                                  r"than the limit of 2 \(sim.limits.Limits.program_uops\)"):
        three = _with(program, 3, "iter_in", 3, "gemm")
        make_backend("fsim", TINY, limits=Limits(program_uops=2)).run(three, _inputs())


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_limits_must_be_positive_ints(value):
    with pytest.raises(InputError, match=rf"^limit insn_uops must be a positive int, not {value!r}$"):
        Limits(insn_uops=value)


@pytest.mark.skipif("rtl" not in BACKENDS, reason="needs Verilator")
def test_the_rtl_refuses_a_program_longer_than_its_cycle_limit_before_running():
    program = _with(_gemm_program(), 3, "iter_out", 300, "gemm")
    with pytest.raises(InvalidProgramError, match=r"^rtl: the program runs 300 micro-op iterations, so "
                                                  r"it needs at least 300 cycles, more than "
                                                  r"max_cycles=299$"):
        make_backend("rtl", TINY, max_cycles=299).run(program, _inputs())


def test_a_micro_op_load_needs_a_table_and_a_store_may_not_overwrite_it():
    program = _gemm_program()
    table = program.regions_with_role("uops")[0]
    bad = _with(program, 4, "dram_base", table.offset // TINY.out_elem_bytes)
    _refused(bad, rf"^instruction #4 .*: STORE writes DRAM bytes {table.offset}..\d+, over the "
                  rf"program's micro-op table \(bytes {table.offset}..{table.offset + table.nbytes - 1}\)$")
    b = ProgramBuilder(TINY)
    b.region("A", (4,), np.int32, "input")
    b.emit(isa.Load(memory_type=isa.MemType.UOP, dram_base=0, y_size=1, x_size=1, x_stride=1))
    b.finish()
    _refused(b.build(), r"^instruction #0 .*: LOAD UOP reads DRAM bytes 0..3, outside the program's "
                        r"micro-op table \(none: the program has no micro-op table\)$")


@pytest.mark.skipif("rtl" not in BACKENDS, reason="needs Verilator")
def test_the_rtl_reports_finish_before_other_instructions():
    """Unreachable through sim.validate (it refuses such a program); the RTL's own check."""
    b = ProgramBuilder(TINY)
    b.finish()
    b.nop(isa.Module.STORE)
    program = b.build(check_tokens=False)
    with pytest.raises(SimulationError, match=r"^rtl: FINISH executed before other instructions "
                                              r"\(1 of 2 retired\); they are not ordered before "
                                              r"FINISH by dependency tokens$"):
        make_backend("rtl", TINY, validate=False).run(program, {})


def test_a_built_programs_tokens_are_verified_once_a_copy_is_verified_again():
    """The builder verified its tokens: the pre-flight check trusts that mark, which no other
    Program carries (a copy, a mutation, a file), so a broken copy is still refused."""
    from hw.program import tokens_verified

    program = _gemm_program()
    capacity = (1 << TINY.token_counter_bits) - 1
    assert tokens_verified(program, capacity) and not tokens_verified(program, capacity - 1)
    copy = Program(program.fingerprint, program.insns, program.regions, program.constants,
                   program.dram_bytes, program.config_name)
    assert not tokens_verified(copy, capacity)
    make_backend("fsim", TINY).run(copy, _inputs())  # verified now, and valid
    truncated = apply(program, TINY, ({"kind": "truncate", "count": len(program.insns) - 1},))
    assert not tokens_verified(truncated, capacity)
    _refused(truncated, r"^token protocol: program does not end with FINISH$")


def test_token_protocols_are_verified_once_per_kinds_of_instructions(monkeypatch):
    """A Program whose instructions have the token kinds of one verified before (a model's
    Programs of one layer shape differ in addresses only) is not verified again; other kinds
    are, and a broken protocol is still refused."""
    from hw import program as hw_program
    from sim import validate
    from sim.validate import check_program

    verified = []
    real = validate.verify_signatures
    monkeypatch.setattr(validate, "verify_signatures", lambda *a: (verified.append(1), real(*a)))
    monkeypatch.setattr(validate, "_TOKENS_PASSED", Memo(1024))  # a fresh table
    program = _gemm_program()
    moved = _gemm_program(store_elem_offset=1)  # the same instructions, another DRAM address

    def copy(p: Program) -> Program:  # unmarked by the builder
        return Program(p.fingerprint, p.insns.copy(), p.regions, p.constants, p.dram_bytes,
                       p.config_name)

    assert not np.array_equal(program.insns, moved.insns)
    check_program(copy(program), TINY)
    check_program(copy(moved), TINY)
    assert len(verified) == 1
    bad = _flags_flipped(program, [(3, "pop_next"), (5, "pop_next")])
    for _ in range(2):
        with pytest.raises(InvalidProgramError, match=r"^token protocol: token dependencies form"):
            check_program(bad, TINY)
    assert len(verified) == 3
    assert hw_program.tokens_verified(program, (1 << TINY.token_counter_bits) - 1)


def test_micro_op_verdicts_are_shared_by_programs_that_read_the_same_micro_ops(monkeypatch):
    """`loop_problem` runs once per instruction word and micro-op words it reads, in a process:
    a Program moved elsewhere in DRAM is not walked again; other micro-ops are, and refused."""
    from sim import validate
    from sim.validate import check_program

    calls = []
    real = validate.loop_problem
    monkeypatch.setattr(validate, "loop_problem", lambda *a: (calls.append(1), real(*a))[1])
    validate._loop_verdicts.cache_clear()
    check_program(_gemm_program(), TINY)
    check_program(_gemm_program(store_elem_offset=1), TINY)
    assert len(calls) == 1
    src = TINY.inp_depth - 2  # moved by 2 iterations of factor 1: reaches inp_depth
    bad = _with(_gemm_program(uop=isa.Uop(0, src, 0), iters=(1, 3)), 3, "src_factor_in", 1, "gemm")
    with pytest.raises(InvalidProgramError, match=r"^instruction #3 \(GEMM .*\): GEMM src index reaches INP"):
        check_program(bad, TINY)
    assert len(calls) == 2


def _flags_flipped(program: Program, flips: list[tuple[int, str]]) -> Program:
    words = program.insns.copy()
    for insn, flag in flips:
        offset = isa.layouts(TINY)["mem"][flag].offset  # the header is the same in every layout
        words[insn, 0] ^= np.uint64(1 << offset)
    return Program(program.fingerprint, words, program.regions, program.constants,
                   program.dram_bytes, program.config_name)


def test_the_token_check_on_columns_says_what_verify_tokens_says():
    """check_program reads the token flags from the encoded columns (one decoded instruction
    per kind): on the program with any one or two flags flipped, it refuses exactly the ones
    hw.program.verify_tokens refuses on the decoded instructions, with its message."""
    import itertools
    import re

    from hw.program import ProgramError, verify_tokens
    from sim.validate import check_program

    program = _gemm_program()
    capacity = (1 << TINY.token_counter_bits) - 1
    bits = list(itertools.product(range(len(program.insns)),
                                  ("pop_prev", "pop_next", "push_prev", "push_next")))
    kinds: set[str] = set()
    for flips in itertools.chain(itertools.combinations(bits, 1), itertools.combinations(bits, 2)):
        bad = _flags_flipped(program, list(flips))
        try:
            verify_tokens(isa.decode(bad.insns, TINY), capacity)
            want = None
        except ProgramError as exc:
            want = f"token protocol: {exc}"
        if want is not None and re.match(r"token protocol: instruction \d+:", want):
            continue  # a flag towards no module: check_encoding's own message comes first
        try:
            check_program(bad, TINY)
            got = None
        except InvalidProgramError as exc:
            got = str(exc)
        assert got == want
        kinds.add("valid" if want is None else " ".join(want.split()[2:5]))
    assert kinds == {"valid", "token imbalance on", "token dependencies form",
                     "instruction #1 LOAD", "instruction #4 STORE"}, kinds


def test_a_token_cycle_through_the_columns_names_the_instructions():
    program = _gemm_program()  # GEMM waits for the store's token, the store for the GEMM's
    bad = _flags_flipped(program, [(3, "pop_next"), (5, "pop_next")])
    _refused(bad, r"^token protocol: token dependencies form a cycle \(a certain deadlock, counting "
                  r"the token counters' room of \d+\) through #3 GEMM .*\[pop_prev pop_next "
                  r"push_next\], #4 STORE .*$")
