import dataclasses
import json

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS
from hw.program import Program, ProgramBuilder, ProgramError

TINY = PRESETS["tiny"]


def _simple(cfg=TINY) -> Program:
    b = ProgramBuilder(cfg)
    src = b.region("src", (2, cfg.batch, cfg.block_out), np.int32, "input")
    out = b.region("out", (2, cfg.batch, cfg.block_out), np.int8, "output")
    b.load(isa.MemType.ACC, src, 0, y_size=1, x_size=2, push_next=True)
    b.store(out, 0, y_size=1, x_size=2, pop_prev=True, push_prev=True)
    b.finish(pop_next=True)
    return b.build()


def test_save_load_round_trip(tmp_path):
    program = _simple()
    path = tmp_path / "p.npz"
    program.save(path)
    loaded = Program.load(path)
    assert np.array_equal(loaded.insns, program.insns)
    assert loaded.regions == program.regions
    assert loaded.fingerprint == TINY.fingerprint() and loaded.config_name == "tiny"
    assert loaded.dram_bytes == program.dram_bytes and loaded.dram_bytes % 4096 == 0
    assert loaded.decoded(TINY) == program.decoded(TINY)


def test_program_is_immutable():
    program = _simple()
    with pytest.raises(ValueError, match="read-only"):
        program.insns[0, 0] = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.fingerprint = "x"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["tiny", "vta", "rect"])
def test_regions_start_on_4k_pages_addressable_by_every_element(name):
    cfg = PRESETS[name]
    b = ProgramBuilder(cfg)
    b.region("a", (3,), np.int8, "input")
    second = b.region("b", (4097,), np.int8, "input")
    third = b.region("c", (1,), np.int8, "input")
    assert (second.offset, third.offset) == (4096, 3 * 4096)  # a page each, a page and a byte: two
    for m in isa.MemType:
        assert b.dram_base(third, m) * cfg.elem_bytes(m) == third.offset


def test_wrong_config_is_an_error():
    with pytest.raises(ProgramError, match=r"program was built for config tiny \(fingerprint "
                                            r"[0-9a-f]{16}\), not for vta \(fingerprint"):
        _simple().check_config(PRESETS["vta"])


def test_inputs_are_checked():
    program = _simple()
    with pytest.raises(ProgramError, match=r"missing \['src'\], unknown \['x'\]"):
        program.initial_dram({"x": np.zeros(1)})
    with pytest.raises(ProgramError, match=r"input 'src' has shape \(3,\), expected \(2, 1, 4\)"):
        program.initial_dram({"src": np.zeros(3, np.int32)})
    with pytest.raises(ProgramError, match="input 'src' has dtype int64, expected int32"):
        program.initial_dram({"src": np.zeros((2, 1, 4), np.int64)})
    with pytest.raises(ProgramError, match="program has no region 'nope'; it has src, out"):
        program.region("nope")


def test_initial_dram_places_instructions_uops_and_data():
    b = ProgramBuilder(TINY)
    const = b.constant("k", np.arange(8, dtype=np.int32))
    b.load_uops(b.uops([isa.Uop(1, 2, 3)]))
    b.finish()
    program = b.build()
    dram = program.initial_dram({})
    assert np.array_equal(program.read_region(dram, "k"), np.arange(8))
    insn_region = program.insn_region
    words = dram[insn_region.offset : insn_region.offset + insn_region.nbytes].view(np.uint64)
    assert np.array_equal(words.reshape(-1, 2), program.insns)
    uops = program.region("__uops")
    word = dram[uops.offset : uops.offset + 4].view(np.uint32)[0]
    assert int(word) == 1 | (2 << 8) | (3 << 16)
    load = program.decoded(TINY)[0]
    assert load.dram_base == uops.offset // 4 and load.x_size == 1
    assert const.offset == 0


def test_token_balance_and_finish_are_checked():
    b = ProgramBuilder(TINY)
    b.nop(isa.Module.LOAD, push_next=True)
    b.finish()
    with pytest.raises(ProgramError, match="token imbalance on queue load->compute: 1 pushed, "
                                            "0 popped"):
        b.build()
    b = ProgramBuilder(TINY)
    b.nop(isa.Module.STORE)
    with pytest.raises(ProgramError, match="program does not end with FINISH"):
        b.build()
    b = ProgramBuilder(TINY)
    b.nop(isa.Module.STORE, push_next=True)
    b.finish()
    with pytest.raises(ProgramError, match="instruction 0: STORE on the store module sets "
                                            "push_next"):
        b.build()
    assert ProgramBuilder(TINY).build(check_tokens=False).insns.shape == (0, 2)


def test_region_errors():
    b = ProgramBuilder(TINY)
    b.region("a", (1,), np.int8, "input")
    with pytest.raises(ProgramError, match="region 'a' is declared twice"):
        b.region("a", (1,), np.int8, "input")
    with pytest.raises(ProgramError, match="region 'b': role must be one of"):
        b.region("b", (1,), np.int8, "weights")


def test_load_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ProgramError, match="bad.npz: not a program file"):
        Program.load(bad)
    good = tmp_path / "good.npz"
    _simple().save(good)
    data = dict(np.load(good))
    data["meta"] = np.array(str(data["meta"]).replace('"format_version": 1', '"format_version": 9'))
    np.savez(good, **data)
    with pytest.raises(ProgramError, match="program format version 9, this workbench reads "
                                            "version 1"):
        Program.load(good)


def test_a_token_cycle_is_a_deadlock_at_build_time():
    b = ProgramBuilder(TINY)
    b.nop(isa.Module.LOAD, pop_next=True, push_next=True)
    b.nop(isa.Module.COMPUTE, pop_prev=True, push_prev=True)
    b.finish()
    with pytest.raises(ProgramError, match=r"token dependencies form a cycle \(a certain deadlock, counting "
                                            r"the token counters' room of \d+\) through #0 NOP-LOAD"):
        b.build()


def test_a_full_token_counter_is_a_deadlock_at_build_time():
    # 2-bit counters hold 3 tokens: compute's 4th push needs load's first pop, which comes
    # after load's 4th push, which needs compute's first pop, which comes after its 4th push.
    cfg = dataclasses.replace(TINY, name="tiny-2bit", token_counter_bits=2)

    def program(pushes: int) -> ProgramBuilder:
        b = ProgramBuilder(cfg)
        for _ in range(pushes):
            b.nop(isa.Module.COMPUTE, push_prev=True)
        for _ in range(pushes):
            b.nop(isa.Module.LOAD, push_next=True)
        b.nop(isa.Module.COMPUTE, pop_prev=True)
        for _ in range(pushes - 1):
            b.nop(isa.Module.COMPUTE, pop_prev=True)
        for _ in range(pushes - 1):
            b.nop(isa.Module.LOAD, pop_next=True)
        b.nop(isa.Module.LOAD, pop_next=True, push_next=True)  # orders the loads before FINISH
        b.nop(isa.Module.COMPUTE, pop_prev=True)
        b.finish()
        return b

    program(3).build()  # three outstanding tokens fit
    with pytest.raises(ProgramError, match=r"a certain deadlock, counting the token counters' room of 3"):
        program(4).build()


def test_work_not_ordered_before_finish_is_rejected():
    b = ProgramBuilder(TINY)
    w = b.region("w", (4, TINY.block_out, TINY.block_in), np.int8, "input")
    b.load(isa.MemType.WGT, w, 0, y_size=1, x_size=4)
    b.finish()
    with pytest.raises(ProgramError, match="instruction #0 LOAD WGT .* is not ordered before FINISH "
                                            "by dependency tokens"):
        b.build()
    b = ProgramBuilder(TINY)
    b.load(isa.MemType.WGT, w, 0, y_size=1, x_size=4, push_next=True)
    b.finish(pop_prev=True)
    assert len(b.build().insns) == 2


def test_region_write_and_view_and_their_errors():
    program = _simple()
    src = program.region("src")
    dram = np.full(program.dram_bytes, 7, np.uint8)
    data = np.arange(src.nbytes // 4, dtype=np.int32).reshape(src.shape)
    src.write(dram, data)
    assert np.array_equal(src.view(dram), data) and np.shares_memory(src.view(dram), dram)
    assert (np.delete(dram, np.arange(src.offset, src.offset + src.nbytes)) == 7).all()
    dims = ", ".join(map(str, src.shape))
    with pytest.raises(ProgramError, match=rf"^region 'src' holds \({dims}\) int32, not \(3,\) int32$"):
        src.write(dram, np.zeros(3, np.int32))
    with pytest.raises(ProgramError, match=r"^region 'src' holds .* int32, not .* int64$"):
        src.write(dram, data.astype(np.int64))


def _resave(path, **changes):
    data = dict(np.load(path))
    meta = json.loads(str(data["meta"]))
    for key, value in changes.items():
        if key == "insns":
            data["insns"] = value
        else:
            meta[key] = value
    data["meta"] = np.array(json.dumps(meta))
    np.savez(path, **data)


@pytest.mark.parametrize("change, message", [
    ({"regions": 5}, r"malformed program metadata \(TypeError: 'int' object is not iterable\)"),
    ({"dram_bytes": 1 << 40}, r"malformed program metadata \(ValueError: dram_bytes 1099511627776 is "
                              r"not an int in \[0, 4294967296\] \(a 32-bit DRAM address reaches 4 GiB\)\)"),
    ({"dram_bytes": 4096}, r"p.npz: region 'out' \(bytes 4096..4103\) is outside the 4096-byte DRAM image$"),
    ({"regions": [{"name": "x", "offset": 0, "shape": [1], "dtype": "object", "role": "input"}]},
     r"malformed program metadata \(ValueError: region 'x' has dtype 'object', role 'input'"),
    ({"fingerprint": None, "regions": []}, r"the instructions \(\[\d+, 2\]\) do not match one "
                                           r"instruction region of shape \[N, 2\]"),
    ({"insns": np.zeros(3, np.uint64)}, r"the instructions \(\[3\]\) do not match one instruction region"),
])
def test_load_rejects_malformed_metadata(tmp_path, change, message):
    path = tmp_path / "p.npz"
    _simple().save(path)
    _resave(path, **change)
    with pytest.raises(ProgramError, match=message):
        Program.load(path)


def test_load_checks_constants_against_their_regions(tmp_path):
    path = tmp_path / "p.npz"
    b = ProgramBuilder(TINY)
    b.constant("k", np.arange(4, dtype=np.int32))
    b.finish()
    b.build().save(path)
    data = dict(np.load(path))
    data["const__k"] = np.zeros(1, np.float64)
    np.savez(path, **data)
    with pytest.raises(ProgramError, match=r"constant 'k' is float64\[1\], its region int32\[4\]$"):
        Program.load(path)
