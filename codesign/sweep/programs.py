"""Compiled schedules shared between the hardware points of a sweep, and their timing runs.

Compiling is the cost of a sweep, and most of it does not depend on the whole config.  Lowering
and the loop-IR passes read the GEMM shape, the data widths, the token counters and the element
sizes (`compile_key`); the rest of the config enters in three places only, each re-checked here
per config so that a cached stream gives, byte for byte, the Program `compile_op` builds:

- the scratchpad depths: lowering's capacity check (`compiler.lower.lower.check_capacity`, run
  again on the stream's recorded buffer sizes) and the instruction encoding (`ProgramBuilder.
  copy_for`, per config);
- the micro-op buffer: `fold_kernels` unrolls a loop nest into a kernel while it has at most
  `max(16, uop_depth // 8)` micro-ops.  A stream whose kernels were all folded whole is the same
  for every limit at least its largest kernel; one where the limit split a nest is kept for that
  limit only.  The emitter's micro-op plan must also fit the buffer;
- the memory system (bus, bursts, requests in flight, DRAM, queues): never read by the compiler.

The timing model's result depends only on the decoded instruction stream and the memory
system's parameters (sim/timing: `_simulate`'s parameters), so `ProgramCache.stats` runs a
stream once per memory system: a later point with the same stream and memory system gets the
same Stats without building or running the Program again (tests compare them with fresh runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from compiler.build import run_passes
from compiler.codegen.accel.emit import emit_builder
from compiler.errors import ScheduleError
from compiler.lower.lower import check_capacity, lower
from compiler.target.accel import AcceleratorTarget
from compiler.tir import stmt as S
from compiler.tir.visit import walk
from hw.config import AcceleratorConfig
from hw.program import Program, ProgramBuilder
from sim.backend import Backend, Stats


def compile_key(cfg: AcceleratorConfig) -> tuple[int, ...]:
    """The config fields that lowering, the passes and the emitter read, but for the depths and
    the micro-op limit (re-checked per config, see the module doc): the GEMM shape, the widths,
    the token counters and the element sizes (DRAM addresses are in elements)."""
    return (cfg.batch, cfg.block_in, cfg.block_out, cfg.inp_bits, cfg.wgt_bits, cfg.acc_bits,
            cfg.token_counter_bits, cfg.uop_elem_bytes)


def uop_limit(target: AcceleratorTarget) -> int:
    """fold_kernels' largest micro-op kernel on `target`."""
    return max(16, target.uop_depth // 8)


def timing_key(backend: Backend) -> tuple[Any, ...] | None:
    """What a timing run reads besides the instruction stream (None: not the timing model)."""
    if backend.name != "timing":
        return None
    cfg: AcceleratorConfig = backend.config  # type: ignore[attr-defined]
    b: Any = backend
    return (cfg.bus_bytes, cfg.max_burst_beats, cfg.mem_inflight, b.dram_latency_cycles,
            b.dram_bytes_per_cycle, cfg.cmd_queue_depth, cfg.token_counter_bits, cfg.out_elem_bytes,
            b.max_cycles, b.fast)


@dataclass
class Stream:
    """One compiled schedule up to the encoding, and the config facts it was compiled under."""

    builder: ProgramBuilder
    serial: int
    limit: int  # the micro-op limit it was compiled with
    kernel_uops: int  # micro-ops of its largest unrolled kernel
    split: bool  # whether the limit split a loop nest (then it holds for `limit` only)
    scratchpad: dict[str, tuple[int, str]]
    fresh: tuple[AcceleratorConfig, Program] | None = None  # compiled, not yet asked for

    def holds_for(self, limit: int) -> bool:
        return limit == self.limit or (not self.split and limit >= self.kernel_uops)


def folding(body: S.Stmt) -> tuple[int, bool]:
    """(micro-ops of the largest kernel, whether a kernel sits directly in a loop) of
    fold_kernels' output: a loop directly around a kernel is one fold_kernels left outside it
    because the whole nest had more micro-ops than its limit."""
    largest, split = 0, False
    for node in walk(body):
        if isinstance(node, S.Kernel):
            largest = max(largest, math.prod(n for _, n in node.explicit))
        elif isinstance(node, S.For) and isinstance(node.body, S.Kernel):
            split = True
    return largest, split


@dataclass
class ProgramCache:
    """Compiled streams by (operator, spec, knobs, compile_key), encoded per config, and their
    timing Stats by memory system."""

    limit: int = 20_000
    hits: int = 0
    misses: int = 0
    runs: int = 0
    reruns: int = 0  # timing runs answered from an earlier run of the same stream
    _streams: dict[Any, list[Stream]] = field(default_factory=dict, repr=False)
    _stats: dict[Any, Stats] = field(default_factory=dict, repr=False)
    _cleared_at: int = field(default=0, repr=False)

    def stream(self, op: Any, knobs: Any) -> Stream:
        """`op` compiled with `knobs` for its target (raises ScheduleError as compile_op does)."""
        target: AcceleratorTarget = op.target
        key = (op.op, op.spec, knobs, compile_key(target.cfg))
        limit = uop_limit(target)
        found = next((s for s in self._streams.get(key, ()) if s.holds_for(limit)), None)
        if found is None:
            self.misses += 1
            found = self._compile(op, knobs, limit)
            self._streams.setdefault(key, []).append(found)
            return found
        self.hits += 1
        check_capacity(found.scratchpad, target)
        if found.builder.uop_count > target.uop_depth:  # as the emitter's micro-op plan refuses it
            raise ScheduleError(f"micro-op kernels need more than {target.uop_depth} entries, the size of "
                                "the micro-op buffer; use smaller tiles")
        return found

    def program(self, op: Any, knobs: Any) -> Program:
        """`op` compiled with `knobs` for its target: compile_op's Program."""
        return self.encode(self.stream(op, knobs), op.target.cfg)

    @staticmethod
    def encode(stream: Stream, cfg: AcceleratorConfig) -> Program:
        """`stream`'s Program for `cfg` (a config whose compile_key is the stream's)."""
        fresh, stream.fresh = stream.fresh, None
        if fresh is not None and fresh[0] == cfg:
            return fresh[1]
        return stream.builder.copy_for(cfg).build(check_tokens=False)

    def known(self, stream: Stream, backend: Backend) -> Stats | None:
        """The Stats of an earlier run of `stream` under `backend`'s memory system, if any."""
        run_key = timing_key(backend)
        found = None if run_key is None else self._stats.get((stream.serial, run_key))
        if found is not None:
            self.reruns += 1
        return found

    def run(self, stream: Stream, program: Program, backend: Backend) -> Stats:
        """The Stats of `program` (`stream` encoded for `backend`'s config) on `backend`, kept."""
        stats = backend.run(program, None).stats  # type: ignore[arg-type]
        self.runs += 1
        run_key = timing_key(backend)
        if run_key is not None:
            self._stats[stream.serial, run_key] = stats
        return stats

    def stats(self, op: Any, knobs: Any, backend: Backend) -> Stats:
        """The Stats of `program(op, knobs)` on `backend` (raises as compiling or running does)."""
        stream = self.stream(op, knobs)
        found = self.known(stream, backend)
        return found if found is not None else self.run(stream, self.encode(stream, op.target.cfg), backend)

    def _compile(self, op: Any, knobs: Any, limit: int) -> Stream:
        target: AcceleratorTarget = op.target
        if self.misses - self._cleared_at > self.limit:  # a bound on memory, not an LRU
            self._streams.clear()
            self._stats.clear()
            self._cleared_at = self.misses
        func = lower(op.schedule(knobs), target, op.op)
        ir = run_passes(func, target)
        builder = emit_builder(func, ir["inject_virtual_threads"], target)
        program = builder.copy_for(target.cfg).build()  # the token checks, once per stream
        largest, split = folding(ir["fold_kernels"])
        return Stream(builder, self.misses, limit, largest, split, func.scratchpad, (target.cfg, program))


__all__ = ["ProgramCache", "Stream", "compile_key", "folding", "timing_key", "uop_limit"]
