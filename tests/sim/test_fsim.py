import dataclasses

import numpy as np
import pytest

from hw import isa
from hw.config import PRESETS
from hw.program import ProgramBuilder, ProgramError
from sim.backend import RunResult, SimulationError
from sim.conformance import CASES, run_suite
from sim.differential import first_difference
from sim.fsim import FunctionalSimulator
from sim.random_programs import random_program

TINY = PRESETS["tiny"]


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_conformance_suite_passes_on_every_preset_and_schedule(preset_cfg, seed):
    report = run_suite(FunctionalSimulator(preset_cfg, seed=seed))
    assert report.failed == 0, [r for r in report.results if not r.passed]
    assert report.passed == len(CASES) >= 25


@pytest.mark.parametrize("seed", range(0, 60))
def test_random_programs_agree_across_schedules(preset_cfg, seed):
    rp = random_program(preset_cfg, seed)
    ref = FunctionalSimulator(preset_cfg).run(rp.program, rp.inputs)
    got = FunctionalSimulator(preset_cfg, seed=seed + 100).run(rp.program, rp.inputs)
    assert first_difference(rp.program, preset_cfg, ref, got) is None


def test_same_program_twice_gives_identical_results():
    rp = random_program(TINY, 7)
    sim = FunctionalSimulator(TINY)
    a, b = sim.run(rp.program, rp.inputs), sim.run(rp.program, rp.inputs)
    assert np.array_equal(a.dram, b.dram) and a.stats == b.stats


def test_stats_have_vta_names_and_no_timing():
    rp = random_program(TINY, 3)
    stats = FunctionalSimulator(TINY).run(rp.program, rp.inputs).stats
    assert stats.cycles is None and stats.load_busy_cycles is None
    assert set(stats.vta_profile()) == {"inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes",
                                        "uop_load_nbytes", "out_store_nbytes", "gemm_counter",
                                        "alu_counter"}
    assert stats.load_insns + stats.compute_insns + stats.store_insns == len(rp.program.insns)


def _run(build, cfg=TINY, seed=None) -> RunResult:
    b = ProgramBuilder(cfg)
    build(b)
    return FunctionalSimulator(cfg, seed=seed, validate=False).run(b.build(check_tokens=False), {})


def test_deadlock_names_each_module_and_the_queue_counts():
    def build(b):
        b.nop(isa.Module.LOAD, pop_next=True, push_next=True)
        b.nop(isa.Module.COMPUTE, pop_prev=True, push_prev=True)
        b.finish()

    with pytest.raises(SimulationError) as info:
        _run(build)
    text = str(info.value)
    assert "deadlock: no module can proceed" in text
    assert "load: blocked at #0 NOP-LOAD  [pop_next push_next], waiting for a compute->load token" in text
    assert ("compute: blocked at #1 NOP-COMPUTE  [pop_prev push_prev], waiting for a "
            "load->compute token") in text
    assert "store: idle (queue empty)" in text
    assert "token counts: l2c=0 c2l=0 c2s=0 s2c=0" in text


def test_a_full_token_queue_blocks_the_pusher():
    cfg = dataclasses.replace(TINY, token_counter_bits=2)  # at most 3 tokens

    def build(b):
        for _ in range(4):
            b.nop(isa.Module.LOAD, push_next=True)
        b.nop(isa.Module.COMPUTE, pop_next=True)  # waits for a store token that never comes
        b.finish()

    with pytest.raises(SimulationError, match="load: blocked at #3 .*waiting for room in "
                                               "load->compute"):
        _run(build, cfg)


def test_missing_finish_and_early_finish():
    with pytest.raises(SimulationError, match="program ended without FINISH"):
        _run(lambda b: b.nop(isa.Module.STORE))

    def early(b):
        b.finish()
        b.nop(isa.Module.STORE)

    with pytest.raises(SimulationError, match=r"FINISH \(#0\) executed before other instructions: "
                                               r"store still holds 1 \(next #1 NOP-STORE\)"):
        _run(early)


def _acc_region(b, n=4):
    return b.region("x", (n, TINY.batch, TINY.block_out), np.int32, "scratch")


@pytest.mark.parametrize(("build", "message"), [
    (lambda b: b.load(isa.MemType.ACC, _acc_region(b), 250, y_size=2, x_size=4),
     "#0 .*LOAD reaches ACC index 257, outside the ACC buffer of 256 elements"),
    (lambda b: b.load(isa.MemType.ACC, _acc_region(b), 0, y_size=4, x_size=4, x_stride=200),
     r"DRAM access up to byte 9663 \(element 603 of 16 bytes\) is outside the 8192-byte DRAM"),
    (lambda b: b.store(_acc_region(b), 255, y_size=1, x_size=2, push_prev=True),
     "STORE reaches OUT index 256, outside the OUT buffer of 256 elements"),
    (lambda b: b.emit(isa.Store(x_size=1, y_size=1, x_pad_0=1, push_prev=True)),
     "STORE cannot pad: all four pad fields must be 0"),
    (lambda b: b.emit(isa.Store(memory_type=isa.MemType.ACC, x_size=1, push_prev=True)),
     "STORE must read the OUT buffer, not ACC"),
    (lambda b: b.emit(isa.Load(memory_type=isa.MemType.OUT, x_size=1)),
     "LOAD into the OUT buffer is not an instruction"),
    (lambda b: b.emit(isa.Store(memory_type=isa.MemType.ACC_8BIT, x_size=1, push_prev=True)),
     "STORE must read the OUT buffer, not ACC_8BIT"),
    (lambda b: b.load(isa.MemType.ACC_8BIT, _acc_region(b), 254, y_size=1, x_size=4),
     r"#0 \(LOAD ACC_8BIT .*\): LOAD reaches ACC index 257, outside the ACC buffer of 256"),
    (lambda b: b.gemm(uop_bgn=0, uop_end=300), "uop_end 300 is outside the UOP buffer of 256"),
    (lambda b: b.gemm(uop_bgn=5, uop_end=3), "uop_end 3 is before uop_bgn 5"),
    (lambda b: b.gemm(uop_bgn=0, uop_end=1, iter_out=3, dst_factor_out=200),
     "GEMM dst index reaches ACC index 400, outside the ACC buffer of 256 elements"),
    (lambda b: b.gemm(uop_bgn=0, uop_end=1, iter_in=3, src_factor_in=200),
     "GEMM src index reaches INP index 400, outside the INP buffer of 256 elements"),
    (lambda b: b.gemm(uop_bgn=0, uop_end=1, iter_out=2, wgt_factor_out=255, iter_in=2,
                      wgt_factor_in=1), "GEMM wgt index reaches WGT index 256"),
    (lambda b: b.alu(uop_bgn=0, uop_end=1, iter_in=3, src_factor_in=200),
     "ALU src index reaches ACC index 400"),
    (lambda b: b.alu(reset=True), "ALU instructions cannot set reset"),
])
def test_out_of_range_and_malformed_instructions(build, message):
    def program(b):
        build(b)
        b.finish(pop_next="STORE" in message)  # wait for the store's token

    with pytest.raises(SimulationError, match=message):
        _run(program)


def test_acc_8bit_load_counts_acc_bytes_and_feeds_the_alu():
    """int8 residual -> acc (sign-extended) + int32 acc, stored as the low 8 bits."""
    b = ProgramBuilder(TINY)
    shape = (TINY.batch, TINY.block_out)
    res = np.full((2, *shape), -3, dtype=np.int8)
    acc = np.full((2, *shape), 1000, dtype=np.int32)
    res_r, acc_r = b.region("res", res.shape, res.dtype, "input"), b.region("acc", acc.shape,
                                                                            acc.dtype, "input")
    out_r = b.region("out", (2, *shape), np.int8, "output")
    b.load(isa.MemType.ACC, acc_r, 0, y_size=1, x_size=2)
    b.load(isa.MemType.ACC_8BIT, res_r, 2, y_size=1, x_size=2)
    b.load_uops(b.uops([isa.Uop(dst=0, src=2)]))
    b.alu(uop_bgn=0, uop_end=1, iter_out=2, dst_factor_out=1, src_factor_out=1,
          alu_opcode=isa.AluOp.ADD, push_next=True)
    b.store(out_r, 0, y_size=1, x_size=2, pop_prev=True, push_prev=True)
    b.finish(pop_next=True)
    result = FunctionalSimulator(TINY).run(b.build(), {"res": res, "acc": acc})
    np.testing.assert_array_equal(result.outputs["out"], np.full((2, *shape), 997 - 1024))
    assert result.stats.acc_load_bytes == 2 * TINY.acc_elem_bytes + 2 * TINY.acc_8bit_elem_bytes
    assert result.stats.compute_insns == 5 and result.stats.alu_uops == 2


def test_wrong_config_and_malformed_word():
    b = ProgramBuilder(TINY)
    b.finish()
    program = b.build()
    with pytest.raises(ProgramError, match="program was built for config tiny"):
        FunctionalSimulator(PRESETS["vta"]).run(program, {})
    bad = dataclasses.replace(program, insns=np.array([[7, 0]], dtype=np.uint64))
    with pytest.raises(SimulationError, match="instruction #0: unknown opcode 7"):
        FunctionalSimulator(TINY).run(bad, {})


def test_first_difference_names_the_store():
    rp = random_program(TINY, 11, tasks=3)
    sim = FunctionalSimulator(TINY)
    ref, dut = sim.run(rp.program, rp.inputs), sim.run(rp.program, rp.inputs)
    dut.dram[np.flatnonzero(ref.dram != 0)[0] :] ^= 0  # untouched: still equal
    assert first_difference(rp.program, TINY, ref, dut) is None
    stores = [i for i, x in enumerate(rp.program.decoded(TINY)) if isinstance(x, isa.Store)]
    first_store = rp.program.decoded(TINY)[stores[0]]
    byte = first_store.dram_base * TINY.out_elem_bytes
    dut.dram[byte] ^= 1
    message = first_difference(rp.program, TINY, ref, dut)
    assert message is not None and f"DRAM byte {byte} differs" in message
    assert f"first differing instruction: #{stores[0]} STORE" in message


def test_random_schedules_expose_a_missing_token():
    """Drop the WAR token that keeps tile 2's weights out of the half tile 0 still reads."""
    from sim.workloads import GemmTiling, blocked_gemm

    work = blocked_gemm(TINY, GemmTiling(4, 8, 4, 4, 2, 4, 2), seed=2)
    insns = work.program.decoded(TINY)
    victim = next(i for i, x in enumerate(insns) if isinstance(x, isa.Load) and x.pop_next)
    insns[victim] = dataclasses.replace(insns[victim], pop_next=False)
    # and the last compute->load push, so the tokens still balance (sim.validate refuses else)
    last = max(i for i, x in enumerate(insns) if isa.module_of(x) == isa.Module.COMPUTE and x.push_prev)
    insns[last] = dataclasses.replace(insns[last], push_prev=False)
    broken = dataclasses.replace(work.program, insns=isa.encode(insns, TINY))
    wrong = 0
    for seed in range(20):
        result = FunctionalSimulator(TINY, seed=seed).run(broken, work.inputs)
        wrong += not np.array_equal(result.outputs["C"], work.expected["C"])
    assert wrong > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1000, 3000))
def test_long_sweep_of_schedules(preset_cfg, seed):
    """`make test-slow`: many more random programs, each under a random schedule."""
    rp = random_program(preset_cfg, seed, tasks=8)
    ref = FunctionalSimulator(preset_cfg).run(rp.program, rp.inputs)
    got = FunctionalSimulator(preset_cfg, seed=seed).run(rp.program, rp.inputs)
    assert first_difference(rp.program, preset_cfg, ref, got) is None


@pytest.mark.parametrize("seed", range(8))
def test_a_replayed_run_equals_a_fresh_simulators_run(seed):
    """The second run of a Program on one simulator replays its recorded steps (sim.fsim._Trace):
    on other inputs it gives the DRAM and counters a fresh simulator gives."""
    rp = random_program(TINY, seed)
    sim = FunctionalSimulator(TINY)
    sim.run(rp.program, rp.inputs)
    rng = np.random.default_rng(seed)
    other = {k: rng.integers(-128, 128, v.shape).astype(v.dtype) for k, v in rp.inputs.items()}
    replayed = sim.run(rp.program, other)
    fresh = FunctionalSimulator(TINY, replay=False).run(rp.program, other)
    assert rp.program in sim._traces
    assert np.array_equal(replayed.dram, fresh.dram) and replayed.stats == fresh.stats


def test_a_changed_micro_op_table_is_not_replayed():
    """run_in takes the caller's DRAM: when its micro-op table differs from the recorded one,
    the run executes (and records) again instead of replaying stale plans."""
    rp = random_program(TINY, 4)
    table = rp.program.regions_with_role("uops")[0]
    sim = FunctionalSimulator(TINY)
    sim.run(rp.program, rp.inputs)
    dram = rp.program.initial_dram(rp.inputs)
    dram[table.offset : table.offset + table.nbytes] = 0  # every micro-op reads index 0
    fresh = dram.copy()
    stats = sim.run_in(rp.program, dram)
    want = FunctionalSimulator(TINY, replay=False).run_in(rp.program, fresh)
    assert np.array_equal(dram, fresh) and stats == want
    unchanged = FunctionalSimulator(TINY, replay=False).run(rp.program, rp.inputs).dram
    assert not np.array_equal(dram, unchanged)  # the table mattered: a stale replay would show


def test_an_alu_instruction_is_prepared_again_after_a_micro_op_load():
    """fsim keeps each ALU instruction's prepared step until a LOAD UOP (sim.fsim._Machine): the
    same instruction word after new micro-ops reaches the new elements, recorded and replayed."""
    b = ProgramBuilder(TINY)
    shape = (4, TINY.batch, TINY.block_out)
    acc_r, out_r = b.region("acc", shape, np.int32, "input"), b.region("out", shape, np.int8, "output")
    b.load(isa.MemType.ACC, acc_r, 0, y_size=1, x_size=4)
    add = {"uop_bgn": 0, "uop_end": 1, "alu_opcode": isa.AluOp.ADD, "use_imm": True}
    for dst, imm in ((0, 5), (2, 5), (2, 7)):  # the second and third ALU share the micro-op load
        if imm == 5:
            b.load_uops(b.uops([isa.Uop(dst=dst)]))
        b.alu(**add, imm=imm)
    b.alu(**add, imm=0, push_next=True)
    b.store(out_r, 0, y_size=1, x_size=4, pop_prev=True, push_prev=True)
    b.finish(pop_next=True)
    program = b.build()
    sim = FunctionalSimulator(TINY)
    for values in (np.arange(4), np.arange(4) * 3 - 20):  # recorded, then replayed
        acc = np.broadcast_to(values[:, None, None], shape).astype(np.int32)
        want = acc.copy()
        want[0] += 5
        want[2] += 12
        result = sim.run(program, {"acc": acc})
        np.testing.assert_array_equal(result.outputs["out"], want.astype(np.int8))
        assert result.stats.alu_uops == 4 and result.stats.compute_insns == 8
    assert program in sim._traces


@pytest.mark.parametrize("seed", range(12))
def test_a_first_run_is_a_replay_of_its_unexecuted_record_and_equals_a_step_by_step_run(preset_cfg, seed):
    """The first run records the steps without their data work, then replays the record: the
    DRAM and counters of the ISA's step-by-step run (`replay=False`), which records nothing."""
    rp = random_program(preset_cfg, seed, tasks=seed % 4 + 1)
    sim, reference = FunctionalSimulator(preset_cfg), FunctionalSimulator(preset_cfg, replay=False)
    got, want = sim.run(rp.program, rp.inputs), reference.run(rp.program, rp.inputs)
    assert sim._traces[rp.program].compiled is not None and rp.program not in reference._traces
    assert np.array_equal(got.dram, want.dram) and got.stats == want.stats
    assert first_difference(rp.program, preset_cfg, want, got) is None


def test_a_run_stopped_by_an_error_leaves_the_dram_of_a_step_by_step_run(monkeypatch):
    """A SimulationError in the middle of a recording run (none reaches a validated Program
    today: planted here on the third STORE) leaves the DRAM as the step-by-step run leaves it:
    every step before the error ran, none after."""
    from sim import fsim

    rp = random_program(TINY, 5, tasks=4)
    real = fsim._Machine._store
    calls: list[int] = []

    def failing(self, insn):
        calls.append(1)
        if len(calls) % 100 == 3:
            raise SimulationError("planted")
        return real(self, insn)

    monkeypatch.setattr(fsim._Machine, "_store", failing)
    drams = []
    for sim in (FunctionalSimulator(TINY), FunctionalSimulator(TINY, replay=False)):
        calls.clear()
        dram = rp.program.initial_dram(rp.inputs)
        with pytest.raises(SimulationError, match=r"^instruction #\d+ \(STORE .*\): planted$"):
            sim.run_in(rp.program, dram)
        drams.append(dram)
    assert np.array_equal(drams[0], drams[1])
    assert not np.array_equal(drams[0], rp.program.initial_dram(rp.inputs))  # steps ran before it


def test_load_and_store_steps_are_shared_for_one_instruction_and_dram_size():
    """`sim.fsim._Machine._move`: a second simulator running the Program reuses the LOAD and
    STORE steps the first one prepared (their checks depend on the DRAM's size: a larger DRAM
    gets steps of its own); every run gives the step-by-step DRAM."""
    from sim.scratchpads import _LoadMove, _StoreMove

    rp = random_program(TINY, 9, tasks=4)
    moves = (_LoadMove, _StoreMove)
    runs = []
    for extra in (0, 0, 64):
        sim = FunctionalSimulator(TINY)
        dram = np.concatenate([rp.program.initial_dram(rp.inputs), np.zeros(extra, np.uint8)])
        want = dram.copy()
        stats = sim.run_in(rp.program, dram)
        assert stats == FunctionalSimulator(TINY, replay=False).run_in(rp.program, want)
        assert np.array_equal(dram, want)
        runs.append([s for s in sim._traces[rp.program].steps if isinstance(s, moves)])
    assert runs[0] and all(a is b for a, b in zip(runs[0], runs[1], strict=True))
    assert not any(a is c for a, c in zip(runs[0], runs[2], strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_a_prepared_program_replays_from_its_first_run(preset_cfg, seed):
    """`prepare` checks, records and binds before any input, from the micro-op tables alone (a
    DRAM image with other inputs, left unwritten): the first run then replays, with the DRAM and
    counters of the step-by-step run."""
    rp = random_program(preset_cfg, seed, tasks=seed % 3 + 1)
    rng = np.random.default_rng(seed)
    other = {k: rng.integers(-128, 128, v.shape).astype(v.dtype) for k, v in rp.inputs.items()}
    scratch = rp.program.initial_dram(other)
    before = scratch.copy()
    sim = FunctionalSimulator(preset_cfg)
    assert sim.prepare(rp.program, scratch) is True
    assert np.array_equal(scratch, before)
    trace = sim._traces[rp.program]
    assert trace.compiled is not None and trace.compiled._bound is not None
    recorded = []
    real = sim._record
    sim._record = lambda *a: recorded.append(1) or real(*a)  # type: ignore[method-assign]
    got = sim.run(rp.program, rp.inputs)
    want = FunctionalSimulator(preset_cfg, replay=False).run(rp.program, rp.inputs)
    assert recorded == [] and np.array_equal(got.dram, want.dram) and got.stats == want.stats


def test_prepare_readies_nothing_where_the_run_would_fail_or_not_replay():
    """Nothing to prepare for a simulator that does not replay; a Program the check refuses is
    left to the run, which raises as it would have."""
    rp = random_program(TINY, 2)
    dram = rp.program.initial_dram(rp.inputs)
    for sim in (FunctionalSimulator(TINY, replay=False), FunctionalSimulator(TINY, seed=3),
                FunctionalSimulator(TINY, validate=False)):
        assert sim.prepare(rp.program, dram) is False and rp.program not in sim._traces
    b = ProgramBuilder(TINY)
    b.nop(isa.Module.STORE)  # no FINISH: the check refuses it
    broken = b.build(check_tokens=False)
    sim = FunctionalSimulator(TINY)
    assert sim.prepare(broken, broken.initial_dram({})) is False and broken not in sim._traces
    with pytest.raises(SimulationError, match="^token protocol: program does not end with FINISH$"):
        sim.run(broken, {})
