"""fsim's recorded runs on disk (sim.run_cache): a later simulator replays a Program from its
first run, bit for bit what a fresh step-by-step run gives; a record that is damaged, another
key's, or made for another config, DRAM size or micro-op table is not replayed."""

import dataclasses

import numpy as np
import pytest

from hw.config import PRESETS
from hw.program import Program
from sim import run_cache, validate
from sim.fsim import FunctionalSimulator
from sim.limits import Limits
from sim.random_programs import random_program

TINY = PRESETS["tiny"]


@pytest.fixture
def folder(tmp_path):
    run_cache.RECORDS.use(tmp_path / "fsim")
    yield tmp_path / "fsim"
    run_cache.RECORDS.use(None)


def _copy(program: Program, **changes) -> Program:
    """The same Program as a new object (as a later process reads it from its file)."""
    return dataclasses.replace(program, **{"insns": program.insns.copy(), **changes})


def _fresh(program, inputs):
    """A step-by-step run with no folder in use."""
    run_cache.RECORDS.use(None)
    return FunctionalSimulator(TINY, replay=False).run(program, inputs)


@pytest.mark.parametrize("seed", range(4))
def test_a_later_simulator_replays_the_record_from_disk(folder, seed):
    rp = random_program(TINY, seed)
    before = run_cache.counts()
    FunctionalSimulator(TINY).run(rp.program, rp.inputs)
    assert len(list(folder.glob("*.pkl"))) == 1
    rng = np.random.default_rng(seed)
    other = {k: rng.integers(-128, 128, v.shape).astype(v.dtype) for k, v in rp.inputs.items()}
    later = FunctionalSimulator(TINY)
    got = later.run(_copy(rp.program), other)
    after = run_cache.counts()
    assert (after["saved"] - before["saved"], after["loaded"] - before["loaded"]) == (1, 1)
    want = _fresh(rp.program, other)
    assert np.array_equal(got.dram, want.dram) and got.stats == want.stats


def test_the_key_covers_config_dram_size_code_and_instructions(monkeypatch):
    rp = random_program(TINY, 1)
    key = run_cache.record_key(rp.program, TINY)
    assert run_cache.record_key(_copy(rp.program), TINY) == key
    assert run_cache.record_key(rp.program, dataclasses.replace(TINY, name="renamed", clock_mhz=300)) == key
    deeper = dataclasses.replace(TINY, cmd_queue_depth=TINY.cmd_queue_depth * 2)
    assert run_cache.record_key(rp.program, deeper) != key
    assert run_cache.record_key(_copy(rp.program, dram_bytes=rp.program.dram_bytes + 4096), TINY) != key
    insns = rp.program.insns.copy()
    insns[0, 0] ^= 1 << 40
    assert run_cache.record_key(_copy(rp.program, insns=insns), TINY) != key
    table = rp.program.regions_with_role("uops")[0]
    constants = dict(rp.program.constants)
    constants[table.name] = np.zeros_like(constants[table.name])
    assert run_cache.record_key(_copy(rp.program, constants=constants), TINY) != key
    moved = [dataclasses.replace(r, offset=r.offset + 4096) if r.role == "uops" else r
             for r in rp.program.regions]
    assert run_cache.record_key(_copy(rp.program, regions=moved), TINY) != key
    monkeypatch.setattr(run_cache, "code_version", lambda: "another simulator")
    assert run_cache.record_key(rp.program, TINY) != key


@pytest.mark.parametrize("how", ["truncated", "empty", "another Program's"])
def test_a_damaged_record_is_recorded_again(folder, how):
    rp, other = random_program(TINY, 2), random_program(TINY, 3)
    FunctionalSimulator(TINY).run(rp.program, rp.inputs)
    FunctionalSimulator(TINY).run(other.program, other.inputs)
    path = folder / f"{run_cache.record_key(rp.program, TINY)}.pkl"
    data = {"truncated": path.read_bytes()[:-100], "empty": b"",
            "another Program's": (folder / f"{run_cache.record_key(other.program, TINY)}.pkl").read_bytes()}
    path.write_bytes(data[how])
    before = run_cache.counts()
    got = FunctionalSimulator(TINY).run(_copy(rp.program), rp.inputs)
    after = run_cache.counts()
    assert after["loaded"] == before["loaded"] and after["saved"] == before["saved"] + 1
    assert np.array_equal(got.dram, _fresh(rp.program, rp.inputs).dram)


def test_a_record_for_another_micro_op_table_is_not_replayed(folder):
    """The key holds the instructions, not the micro-op table the DRAM brings: a record whose
    table differs from the DRAM's is run (and recorded) again, as in one process."""
    rp = random_program(TINY, 4)
    FunctionalSimulator(TINY).run(rp.program, rp.inputs)
    table = rp.program.regions_with_role("uops")[0]
    dram = rp.program.initial_dram(rp.inputs)
    dram[table.offset : table.offset + table.nbytes] = 0  # every micro-op reads index 0
    fresh = dram.copy()
    stats = FunctionalSimulator(TINY).run_in(_copy(rp.program), dram)
    run_cache.RECORDS.use(None)
    want = FunctionalSimulator(TINY, replay=False).run_in(rp.program, fresh)
    assert np.array_equal(dram, fresh) and stats == want


def test_nothing_is_kept_without_a_folder_or_for_seeded_schedules(tmp_path, monkeypatch):
    rp = random_program(TINY, 5)
    before = run_cache.counts()
    FunctionalSimulator(TINY).run(rp.program, rp.inputs)  # the tests' default: CODESIGN_FSIM_CACHE=off
    run_cache.RECORDS.use(tmp_path)
    try:
        FunctionalSimulator(TINY, seed=3).run(rp.program, rp.inputs)  # a random schedule records nothing
        FunctionalSimulator(TINY, validate=False).run(rp.program, rp.inputs)
    finally:
        run_cache.RECORDS.use(None)
    assert run_cache.counts() == before and not list(tmp_path.iterdir())


def test_a_folder_that_cannot_be_written_only_costs_the_record(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(run_cache.CACHE_ENV, str(blocker / "fsim"))
    rp = random_program(TINY, 6)
    got = FunctionalSimulator(TINY).run(rp.program, rp.inputs)
    monkeypatch.setenv(run_cache.CACHE_ENV, "off")
    assert np.array_equal(got.dram, FunctionalSimulator(TINY).run(rp.program, rp.inputs).dram)


def test_a_record_stands_for_the_checks_it_passed_for_the_same_limits(folder, monkeypatch):
    """sim.validate reads nothing the key does not cover: a later simulator with the record and
    the same limits does not check the Program again; with other limits it does."""
    rp = random_program(TINY, 7)
    want = FunctionalSimulator(TINY).run(rp.program, rp.inputs)
    checked = []
    monkeypatch.setattr(validate, "_check", lambda program, *args: checked.append(program))
    got = FunctionalSimulator(TINY).run(_copy(rp.program), rp.inputs)
    assert checked == [] and np.array_equal(got.dram, want.dram)
    other = _copy(rp.program)
    FunctionalSimulator(TINY, limits=Limits(insn_uops=1 << 20)).run(other, rp.inputs)
    assert checked == [other]
