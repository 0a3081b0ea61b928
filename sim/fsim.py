"""`fsim`: the functional simulator, the executable definition of the ISA.

Bit-exact and token-checked, with no notion of time.  Each module (load, compute, store) runs its
instruction queue in order; an instruction issues when every queue it pops holds a token and every
queue it pushes has room.  The default schedule is deterministic; with `seed`, every step picks a
random ready module, so a missing token shows up as a wrong answer or a deadlock.

Execution is vectorized with numpy: a GEMM instruction never loops in Python over its micro-op
iterations (see `sim.gemm`).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
from threadpoolctl import ThreadpoolController

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program
from sim import alu
from sim.backend import Capabilities, RunResult, SimulationError, Stats, check_dram
from sim.gemm import GemmUnit
from sim.limits import DEFAULT_LIMITS, Limits
from sim.scratchpads import Scratchpads, sram_of
from sim.validate import check_program

_ORDER = (isa.Module.LOAD, isa.Module.COMPUTE, isa.Module.STORE)
# GEMM products are small: BLAS threads only add contention (50x slower on a loaded 2-core host).
_BLAS = ThreadpoolController()


class FunctionalSimulator:
    """Backend `fsim`.  `seed=None` runs the deterministic schedule; an int a random legal one."""

    name = "fsim"
    capabilities = Capabilities(values=True, cycles=False, seeded=True)

    def __init__(self, config: AcceleratorConfig, *, seed: int | None = None,
                 limits: Limits = DEFAULT_LIMITS, validate: bool = True) -> None:
        """`limits` bound the work `sim.validate` lets through; `validate=False` skips those
        checks (tests of the run-time detectors: deadlock, FINISH too early)."""
        self.config = config
        self.seed = seed
        self.limits = limits
        self.validate = validate

    def run(self, program: Program, inputs: Mapping[str, np.ndarray]) -> RunResult:
        program.check_config(self.config)
        if self.validate:
            check_program(program, self.config, self.limits)
        dram = program.initial_dram(inputs)
        stats = self._execute(program, dram)
        return RunResult(program.read_outputs(dram), stats, dram)

    def run_in(self, program: Program, dram: np.ndarray) -> Stats:
        """Run `program` against the caller's DRAM image, updated in place (sim.backend)."""
        program.check_config(self.config)
        check_dram(program, dram)
        if self.validate:
            check_program(program, self.config, self.limits)
        return self._execute(program, dram)

    def _execute(self, program: Program, dram: np.ndarray) -> Stats:
        insns = _decode_all(program, self.config)
        machine = _Machine(self.config, dram)
        with _BLAS.limit(limits=1, user_api="blas"):
            _Scheduler(insns, machine, self.seed).run()
        return machine.stats


def _decode_all(program: Program, cfg: AcceleratorConfig) -> list[isa.Insn]:
    out = []
    seen: dict[tuple[int, int], isa.Insn] = {}  # instruction records are immutable: share them
    for index, (lo, hi) in enumerate(program.insns.tolist()):
        insn = seen.get((lo, hi))
        if insn is None:
            try:
                insn = seen[lo, hi] = isa.decode_insn(lo | (hi << isa.WORD_BITS), cfg)
            except isa.EncodingError as exc:
                raise SimulationError(f"instruction #{index}: {exc}") from None
        out.append(insn)
    return out


class _Machine:
    """Architectural state (scratchpads, DRAM) and the execution of one instruction."""

    def __init__(self, cfg: AcceleratorConfig, dram: np.ndarray) -> None:
        self.cfg = cfg
        self.spads = Scratchpads(cfg, dram)
        self.gemm = GemmUnit(cfg, self.spads)
        self.stats = Stats()

    def execute(self, insn: isa.Insn) -> None:
        if isinstance(insn, isa.Load):
            self._load(insn)
        elif isinstance(insn, isa.Store):
            self._store(insn)
        elif isinstance(insn, isa.Gemm):
            self.stats.gemm_uops += self.gemm.execute(insn)
        elif isinstance(insn, isa.Alu):
            self.stats.alu_uops += alu.alu(self.cfg, self.spads, insn)

    def _load(self, insn: isa.Load) -> None:
        if insn.x_size == 0:
            return
        if insn.memory_type == isa.MemType.OUT:
            raise SimulationError("LOAD into the OUT buffer is not an instruction (STORE reads it)")
        nbytes = self.spads.load(insn)
        key = f"{sram_of(insn.memory_type).name.lower()}_load_bytes"  # ACC_8BIT counts as acc
        setattr(self.stats, key, getattr(self.stats, key) + nbytes)

    def _store(self, insn: isa.Store) -> None:
        if insn.x_size == 0:
            return
        if insn.memory_type != isa.MemType.OUT:
            raise SimulationError(f"STORE must read the OUT buffer, not {insn.memory_type.name}")
        if (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1) != (0, 0, 0, 0):
            raise SimulationError("STORE cannot pad: all four pad fields must be 0")
        self.stats.out_store_bytes += self.spads.store(insn)

    def count(self, module: isa.Module) -> None:
        key = f"{module.name.lower()}_insns"
        setattr(self.stats, key, getattr(self.stats, key) + 1)


class _Scheduler:
    """Runs the three module queues under the token rules until FINISH."""

    def __init__(self, insns: list[isa.Insn], machine: _Machine, seed: int | None) -> None:
        self.machine = machine
        self.queues: dict[isa.Module, deque[_Entry]] = {m: deque() for m in _ORDER}
        for index, insn in enumerate(insns):
            pops, pushes = _tokens_of(index, insn)
            self.queues[isa.module_of(insn)].append(_Entry(index, insn, pops, pushes))
        self.tokens = [0] * len(isa.Queue)
        self.token_max = (1 << machine.cfg.token_counter_bits) - 1
        self.rng = random.Random(seed) if seed is not None else None
        self.finished = False

    def run(self) -> None:
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
        return all(tokens[q] > 0 for q in head.pops) and all(
            tokens[q] < self.token_max for q in head.pushes
        )

    def _step(self, module: isa.Module) -> None:
        index, insn, pops, pushes = self.queues[module].popleft()
        for q in pops:
            self.tokens[q] -= 1
        try:
            self.machine.execute(insn)
        except SimulationError as exc:
            raise SimulationError(f"instruction #{index} ({isa.format_insn(insn)}): {exc}") from None
        self.machine.count(module)
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


def _tokens_of(index: int, insn: isa.Insn) -> tuple[list[isa.Queue], list[isa.Queue]]:
    try:
        return isa.token_queues(insn)
    except isa.EncodingError as exc:
        raise SimulationError(f"instruction #{index}: {exc}") from None


def _qname(q: isa.Queue) -> str:
    return q.name.lower().replace("_to_", "->")
