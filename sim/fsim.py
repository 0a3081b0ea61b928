"""`fsim`: the functional simulator, the executable definition of the ISA.

Bit-exact and token-checked, with no notion of time.  Each module (load, compute, store) runs its
instruction queue in order; an instruction issues when every queue it pops holds a token and every
queue it pushes has room.  The default schedule is deterministic; with `seed`, every step picks a
random ready module, so a missing token shows up as a wrong answer or a deadlock.

Execution is vectorized with numpy: a GEMM instruction never loops in Python over its micro-op
iterations (see `sim.gemm`).  A model runs each Program once per input: the deterministic run of a
validated Program is recorded as its data steps (`_Trace`), compiled (`sim.replay`: fused, bound
to SRAM kept between runs) and replayed, so decoding, token scheduling, checks and micro-op plans
happen once per Program.  The schedule of a validated Program does not depend on its data, so
its first run records the steps without executing them (but the LOAD UOPs the plans read) and
then replays them too: the first input costs one replay, not a step-by-step run beside it.
`replay=False` runs every input step by step instead, the ISA's definition the replay is tested
against.  `sim.run_cache` keeps the records on disk for later processes, where a folder is in use.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from threadpoolctl import ThreadpoolController

from hw import isa
from hw.config import AcceleratorConfig
from hw.errors import WorkbenchError
from hw.memo import Memo
from hw.program import Program, Signature, token_signature
from sim import alu
from sim.backend import Capabilities, RunResult, SimulationError, Stats, check_dram
from sim.gemm import GemmUnit, shared_step
from sim.limits import DEFAULT_LIMITS, Limits
from sim.replay import Replay
from sim.run_cache import load_record, save_record
from sim.scratchpads import Scratchpads, dram_window, sram_of
from sim.validate import check_program, mark_passed

_ORDER = (isa.Module.LOAD, isa.Module.COMPUTE, isa.Module.STORE)
_RANK = {m: k for k, m in enumerate(_ORDER)}
_MOVES_MAX = 1 << 14  # LOAD and STORE steps kept for later machines (a model has a few thousand)
# GEMM products are small: BLAS threads only add contention (50x slower on a loaded 2-core host).
_BLAS = ThreadpoolController()


class FunctionalSimulator:
    """Backend `fsim`.  `seed=None` runs the deterministic schedule; an int a random legal one."""

    name = "fsim"
    capabilities = Capabilities(values=True, cycles=False, seeded=True)

    def __init__(self, config: AcceleratorConfig, *, seed: int | None = None,
                 limits: Limits = DEFAULT_LIMITS, validate: bool = True, replay: bool = True) -> None:
        """`limits` bound the work `sim.validate` lets through; `validate=False` skips those
        checks (tests of the run-time detectors: deadlock, FINISH too early); `replay=False`
        runs every input step by step and records nothing (the reference the replay is tested
        against; a seeded or unvalidated simulator never replays)."""
        self.config = config
        self.seed = seed
        self.limits = limits
        self.validate = validate
        self.replays = replay and seed is None and validate
        # per Program: its deterministic run as a `_Trace`, replayed on every run (the first too)
        self._traces: weakref.WeakKeyDictionary[Program, _Trace] = weakref.WeakKeyDictionary()

    def run(self, program: Program, inputs: Mapping[str, np.ndarray]) -> RunResult:
        program.check_config(self.config)
        trace = self._check(program)
        dram = program.initial_dram(inputs)
        stats = self._execute(program, dram, trace)
        return RunResult(program.read_outputs(dram), stats, dram)

    def run_in(self, program: Program, dram: np.ndarray) -> Stats:
        """Run `program` against the caller's DRAM image, updated in place (sim.backend)."""
        program.check_config(self.config)
        check_dram(program, dram)
        return self._execute(program, dram, self._check(program))

    def _check(self, program: Program) -> _Trace | None:
        """`sim.validate.check_program`, where `validate`; the Program's record where its run
        replays (the deterministic schedule, validated). A record kept on disk after the
        Program passed for these limits stands for the check (its key covers what it reads)."""
        if not self.validate:
            return None
        trace = self._trace_of(program) if self.replays else None
        if trace is not None and trace.validated == self.limits:
            mark_passed(program, self.config, self.limits)
        check_program(program, self.config, self.limits)
        return trace

    def _execute(self, program: Program, dram: np.ndarray, trace: _Trace | None) -> Stats:
        """Replay `trace` (`self._check`'s lookup) where it matches `dram`; else, where this
        simulator replays, record the run without its data work and replay the record; else run
        step by step."""
        if trace is not None and trace.matches(dram, self.config.elem_bytes(isa.MemType.UOP)):
            return trace.replay(dram)
        trace, stats = self._record(program, dram)
        if trace is not None:
            trace.replay(dram)
        return stats

    def _record(self, program: Program, dram: np.ndarray) -> tuple[_Trace | None, Stats]:
        """Run `program`'s schedule against `dram`: where this simulator replays, recorded (not
        run), compiled, kept and bound (`_Trace`); else step by step (no record)."""
        insns = _decode_all(program, self.config)
        machine = _Machine(self.config, dram, record=self.replays)
        with _BLAS.limit(limits=1, user_api="blas"):
            try:
                _Scheduler(insns, machine, self.seed).run()
            except SimulationError:
                machine.catch_up()  # the DRAM a step-by-step run leaves where it stops
                raise
        if not self.replays:
            return None, machine.stats
        self._traces[program] = trace = machine.trace()
        trace.validated = self.limits  # replayable: checked first
        replay = trace.compile()  # before it is kept: a later process replays without compiling
        save_record(program, self.config, trace)
        replay.adopt(machine.spads)  # nothing but the micro-ops written: SRAM as fresh SRAM
        return trace, machine.stats

    def prepare(self, program: Program, dram: np.ndarray) -> bool:
        """Do now, before any input, what `run_in(program, dram)` would do first only once: check
        the Program, then load its record (or record its schedule, which needs no data: `dram`
        provides the micro-op tables; a scratch image, which a failing recording may write) and
        bind its replay. Whether the Program is ready to replay; False where this simulator
        does not replay or the check or the recording fails: the run then meets the error
        where it would."""
        if not self.replays:
            return False
        try:
            program.check_config(self.config)
            check_dram(program, dram)
            trace = self._check(program)
            if trace is None or not trace.matches(dram, self.config.elem_bytes(isa.MemType.UOP)):
                trace, _ = self._record(program, dram)
        except WorkbenchError:
            self._traces.pop(program, None)
            return False
        assert trace is not None
        trace.compile().bind()
        return True

    def _trace_of(self, program: Program) -> _Trace | None:
        """This simulator's record of `program`, else one kept on disk (`sim.run_cache`)."""
        trace = self._traces.get(program)
        if trace is None:
            kept = load_record(program, self.config)
            if isinstance(kept, _Trace):
                self._traces[program] = trace = kept
        return trace


def _decode_all(program: Program, cfg: AcceleratorConfig) -> list[isa.Insn]:
    out = []
    seen: dict[tuple[int, int], isa.Insn] = {}  # instruction records are immutable: share them
    decode = isa.decoder(cfg)
    for index, (lo, hi) in enumerate(program.insns.tolist()):
        insn = seen.get((lo, hi))
        if insn is None:
            try:
                insn = seen[lo, hi] = decode(lo | (hi << isa.WORD_BITS))
            except isa.EncodingError as exc:
                raise SimulationError(f"instruction #{index}: {exc}") from None
        out.append(insn)
    return out


Step = Callable[[Scratchpads], None]


class _Trace:
    """A run of one validated Program reduced to its data movement and arithmetic, in the order
    the deterministic schedule ran them.  Everything else (decoding, token order, bounds checks,
    micro-op plans, counters) depends only on the Program, the config, the DRAM's size and the
    micro-ops that LOAD UOP reads, which `sim.validate` confines to the Program's own micro-op
    table (no STORE writes it): a later run whose DRAM holds the same table replays the steps
    (compiled by `sim.replay` when recorded) and gives the same DRAM, bit for bit.
    Picklable: plain attributes, and no reference to a DRAM array."""

    def __init__(self, cfg: AcceleratorConfig, dram_size: int, uops: list[tuple[isa.Load, bytes]],
                 steps: list[Step], stats: Stats) -> None:
        self.cfg, self.dram_size, self.uops, self.steps, self.stats = cfg, dram_size, uops, steps, stats
        self.compiled: Replay | None = None
        self.validated: Limits | None = None  # the limits `sim.validate` passed the Program for

    def matches(self, dram: np.ndarray, uop_elem_bytes: int) -> bool:
        """Whether `dram` has the recorded size and holds the recorded micro-op table."""
        return dram.size == self.dram_size and all(
            dram_window(dram, insn, uop_elem_bytes).tobytes() == data for insn, data in self.uops
        )

    def compile(self) -> Replay:
        """The steps compiled for replay (`sim.replay`), once (the recording run does it); a
        compiled trace pickles as its compiled ops (they share the steps' arrays)."""
        if self.compiled is None:
            self.compiled = Replay(self.cfg, self.steps)
        return self.compiled

    def __getstate__(self) -> dict[str, Any]:
        """Compiled, the ops are the record: the steps stay behind (a tenth of the bytes)."""
        return {**self.__dict__, "steps": []} if self.compiled is not None else self.__dict__

    def replay(self, dram: np.ndarray) -> Stats:
        """Run the recorded steps against `dram`, updated in place; the recorded counters."""
        compiled = self.compile()
        with _BLAS.limit(limits=1, user_api="blas"):
            compiled.run(dram)
        return dataclasses.replace(self.stats)


class _Machine:
    """Architectural state (scratchpads, DRAM) and the execution of one instruction; with
    `record`, the steps of the run, recorded but not run: only the LOAD UOPs execute, for the
    plans of the GEMM and ALU instructions after them (see `_Trace`; `catch_up` runs the
    steps recorded so far)."""

    def __init__(self, cfg: AcceleratorConfig, dram: np.ndarray, record: bool = False) -> None:
        self.cfg = cfg
        self.spads = Scratchpads(cfg, dram)
        self.gemm = GemmUnit(cfg, self.spads)
        # ALU steps per instruction, valid until a LOAD UOP changes the micro-ops (as GEMM plans)
        self.alu_steps: dict[int, alu.AluStep] = {}
        clear_plans = self.spads.on_uop_load

        def on_uop_load() -> None:
            clear_plans()
            self.alu_steps.clear()

        self.spads.on_uop_load = on_uop_load
        self.stats = Stats()
        # LOAD and STORE steps and their byte counts, per instruction object (`_decode_all` and
        # `isa.decoder` share one per word), shared by the machines of this config and DRAM size
        self.moves = _shared_moves(cfg)
        self.record = record
        self.steps: list[Step] = []
        self.uops: list[tuple[isa.Load, bytes]] = []

    def execute(self, insn: isa.Insn) -> None:
        step = self._prepare(insn)
        if step is None:
            return
        if not self.record:
            step(self.spads)
        elif isinstance(insn, isa.Load) and insn.memory_type == isa.MemType.UOP:
            # the micro-ops are planned in: a replay checks the table instead of loading it
            step(self.spads)
            window = dram_window(self.spads.dram, insn, self.cfg.elem_bytes(isa.MemType.UOP))
            self.uops.append((insn, window.tobytes()))
        else:
            self.steps.append(step)

    def catch_up(self) -> None:
        """Run the steps recorded so far: a run that stops on an error leaves the DRAM a
        step-by-step run leaves (the data steps read no micro-op)."""
        if self.record:
            for step in self.steps:
                step(self.spads)
            self.steps.clear()

    def trace(self) -> _Trace:
        return _Trace(self.cfg, self.spads.dram.size, self.uops, self.steps,
                      dataclasses.replace(self.stats))

    def _prepare(self, insn: isa.Insn) -> Step | None:
        """Check `insn` and count it; the step that moves or computes its data, if any."""
        if isinstance(insn, isa.Load):
            return self._load(insn)
        if isinstance(insn, isa.Store):
            return self._store(insn)
        if isinstance(insn, isa.Gemm):
            gemm = self.gemm.prepare(insn)
            self.stats.gemm_uops += gemm.uops
            return gemm
        if isinstance(insn, isa.Alu):
            step = self.alu_steps.get(id(insn))  # (the insns outlive the machine's run)
            if step is None:  # (a step is stateless: the trace may hold it more than once)
                step = self.alu_steps[id(insn)] = shared_step(
                    self.cfg, self.spads, insn, insn, lambda: alu.prepare_alu(self.cfg, self.spads, insn))
            self.stats.alu_uops += step.uops
            return step
        return None

    def _load(self, insn: isa.Load) -> Step | None:
        if insn.x_size == 0:
            return None
        if insn.memory_type == isa.MemType.OUT:
            raise SimulationError("LOAD into the OUT buffer is not an instruction (STORE reads it)")
        return self._move(insn, lambda: (
            self.spads.prepare_load(insn), _LOAD_BYTES[insn.memory_type],
            insn.y_size * insn.x_size * self.cfg.elem_bytes(insn.memory_type)))

    def _store(self, insn: isa.Store) -> Step | None:
        if insn.x_size == 0:
            return None
        if insn.memory_type != isa.MemType.OUT:
            raise SimulationError(f"STORE must read the OUT buffer, not {insn.memory_type.name}")
        if (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1) != (0, 0, 0, 0):
            raise SimulationError("STORE cannot pad: all four pad fields must be 0")
        if insn.y_size == 0:
            return None
        return self._move(insn, lambda: (self.spads.prepare_store(insn), "out_store_bytes",
                                         insn.y_size * insn.x_size * self.cfg.out_elem_bytes))

    def _move(self, insn: isa.Load | isa.Store, prepare: Callable[[], tuple[Step, str, int]]) -> Step:
        """The step of a LOAD or STORE, its bytes counted: `prepare()`'s (step, Stats key, bytes),
        kept in `self.moves` for the next machine (it depends only on the config, the
        instruction and the DRAM's size; the entry holds the instruction, so its id names no
        other while kept)."""
        index = (id(insn), self.spads.dram.size)
        known = self.moves.get(index)
        if known is not None and known[0] is insn:
            _, step, key, nbytes = known
        else:
            step, key, nbytes = prepare()
            self.moves.keep(index, (insn, step, key, nbytes))
        setattr(self.stats, key, getattr(self.stats, key) + nbytes)
        return step

    def count(self, module: isa.Module, count: int = 1) -> None:
        key = _INSNS[module]
        setattr(self.stats, key, getattr(self.stats, key) + count)


@functools.lru_cache(maxsize=16)
def _shared_moves(cfg: AcceleratorConfig) -> Memo[tuple[int, int], tuple[Any, ...]]:
    """(instruction id, DRAM size) -> (instruction, step, Stats key, bytes) of LOADs and STOREs
    (see `_Machine._move`)."""
    return Memo(_MOVES_MAX)


# The Stats counters of each module's instructions and of each LOAD's bytes (ACC_8BIT counts as acc)
_INSNS = {m: f"{m.name.lower()}_insns" for m in isa.Module}
_LOAD_BYTES = {m: f"{sram_of(m).name.lower()}_load_bytes" for m in isa.MemType}


class _Scheduler:
    """Runs the three module queues under the token rules until FINISH."""

    def __init__(self, insns: list[isa.Insn], machine: _Machine, seed: int | None) -> None:
        self.machine = machine
        self.queues: dict[isa.Module, deque[_Entry]] = {m: deque() for m in _ORDER}
        # per instruction object (`_decode_all` shares one per distinct word): its first use
        # is its lowest index, so an illegal flag is reported where it was before
        kinds: dict[int, Signature] = {}
        for index, insn in enumerate(insns):
            kind = kinds.get(id(insn))
            if kind is None:
                kind = kinds[id(insn)] = _tokens_of(index, insn)
            module, pops, pushes = kind
            self.queues[module].append(_Entry(index, insn, pops, pushes))
        self.tokens = [0] * len(isa.Queue)
        self.counts = [0] * len(_ORDER)
        self.token_max = (1 << machine.cfg.token_counter_bits) - 1
        self.rng = random.Random(seed) if seed is not None else None
        self.finished = False

    def run(self) -> None:
        try:
            self._run()
        finally:  # the instructions run, by module (counted here: a Stats field per step is slow)
            for module, count in zip(_ORDER, self.counts, strict=True):
                self.machine.count(module, count)

    def _run(self) -> None:
        while not self.finished:
            ready = [m for m in _ORDER if self._ready(m)]
            if not ready:
                raise SimulationError(self._stuck_message())
            if self.rng is None:
                for module in ready:  # deterministic: each ready module runs until blocked
                    while not self.finished and self._ready(module):
                        self._step(module)
            else:
                self._step(self.rng.choice(ready))

    def _ready(self, module: isa.Module) -> bool:
        queue = self.queues[module]
        if not queue:
            return False
        head = queue[0]
        tokens = self.tokens
        for q in head.pops:  # (a loop, not all(): this runs once or twice per instruction)
            if tokens[q] <= 0:
                return False
        return not head.pushes or all(tokens[q] < self.token_max for q in head.pushes)

    def _step(self, module: isa.Module) -> None:
        index, insn, pops, pushes = self.queues[module].popleft()
        for q in pops:
            self.tokens[q] -= 1
        try:
            self.machine.execute(insn)
        except SimulationError as exc:
            raise SimulationError(f"instruction #{index} ({isa.format_insn(insn)}): {exc}") from None
        self.counts[_RANK[module]] += 1
        for q in pushes:
            self.tokens[q] += 1
        if isinstance(insn, isa.Finish):
            self._finish(index)

    def _finish(self, index: int) -> None:
        self.finished = True
        left = {m: q for m, q in self.queues.items() if q}
        if left:
            detail = "; ".join(
                f"{m.name.lower()} still holds {len(q)} (next #{q[0].position} {isa.format_insn(q[0].insn)})"
                for m, q in left.items()
            )
            raise SimulationError(
                f"FINISH (#{index}) executed before other instructions: {detail}; "
                "they are not ordered before FINISH by dependency tokens"
            )

    def _stuck_message(self) -> str:
        if not any(self.queues.values()):
            return "program ended without FINISH: every queue is empty and done was never set"
        lines = ["deadlock: no module can proceed"]
        for module in _ORDER:
            lines.append(f"  {module.name.lower()}: {self._blocked_on(module)}")
        counts = " ".join(f"{q.short}={self.tokens[q]}" for q in isa.Queue)
        lines.append(f"  token counts: {counts}")
        return "\n".join(lines)

    def _blocked_on(self, module: isa.Module) -> str:
        queue = self.queues[module]
        if not queue:
            return "idle (queue empty)"
        index, insn, pops, pushes = queue[0]
        waits = [f"a {_qname(q)} token" for q in pops if self.tokens[q] == 0]
        waits += [f"room in {_qname(q)}" for q in pushes if self.tokens[q] >= self.token_max]
        return f"blocked at #{index} {isa.format_insn(insn)}, waiting for {' and '.join(waits)}"


class _Entry(NamedTuple):
    position: int  # in the program
    insn: isa.Insn
    pops: list[isa.Queue]
    pushes: list[isa.Queue]


def _tokens_of(index: int, insn: isa.Insn) -> Signature:
    """(module, queues popped, queues pushed) of `insn` (`isa.token_queues`, cached by kind)."""
    try:
        return token_signature(insn)
    except isa.EncodingError as exc:
        raise SimulationError(f"instruction #{index}: {exc}") from None


def _qname(q: isa.Queue) -> str:
    return q.name.lower().replace("_to_", "->")
