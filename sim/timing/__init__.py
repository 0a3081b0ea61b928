"""`timing`: a cycle-level model of hw/rtl that computes no tensor values.

`TimingSimulator(cfg).run(program, inputs)` returns the `Stats` of the rtl backend -- cycles,
busy and stall cycles per module, GEMM busy cycles -- predicted by an event model of the
micro-architecture of hw/rtl/CONTRACT.md (C++: model.h and its .cpp files, compiled once
through the build cache), plus the functional counters, which equal fsim's exactly.  Outputs are
empty and the DRAM image is not simulated: the model moves no data, so it needs no inputs (any
given are ignored).  `run_traced` also returns the activity of every module and DMA channel.

Fidelity: cycle for cycle equal to the RTL on the fidelity corpus (sim/fidelity.py, `codesign
bench fidelity`): every counter of Stats, on vta, tiny, rect and a stress config.  Where the RTL
changes, tests/sim/test_fidelity.py says by how much.

The DRAM model (latency, bytes per cycle) defaults to the config's and can be overridden per
simulator, as on the rtl backend.  A program whose modules wait on each other forever raises
SimulationError naming the blocked instructions, as fsim does.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hw.config import BURST_BOUNDARY_BYTES, AcceleratorConfig
from hw.program import Program
from sim.backend import Capabilities, RunResult, SimulationError, Stats, check_dram
from sim.limits import DEFAULT_LIMITS, Limits
from sim.rtl.backend import check_positive
from sim.timing import build, decode
from sim.timing.trace import activity
from sim.trace import Activity
from sim.validate import check_cycles, check_program, describe, iterations

DEFAULT_MAX_CYCLES = 1 << 40
_PARAMS = ("bus_bytes", "max_burst", "inflight", "latency", "bytes_per_cycle", "queue_depth",
           "token_max", "insn_addr", "insn_count", "out_elem_bytes", "trace", "max_cycles",
           "fast", "boundary")
_DONE, _DEADLOCK, _CYCLE_LIMIT, _FINISH_EARLY = range(4)
_MODULES = ("load", "compute", "store")
_QUEUES = ("load->compute", "compute->load", "compute->store", "store->compute")
_I64P = ctypes.POINTER(ctypes.c_int64)


class _Library:
    _loaded: dict[Path, _Library] = {}

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        lib.tm_new.restype = ctypes.c_void_p
        lib.tm_free.argtypes = [ctypes.c_void_p]
        lib.tm_run.argtypes = [ctypes.c_void_p, _I64P, ctypes.c_int64, _I64P, _I64P]
        lib.tm_run.restype = ctypes.c_int
        for name in ("tm_n_fields", "tm_n_params", "tm_n_results"):
            getattr(lib, name).restype = ctypes.c_int64
        lib.tm_trace_length.argtypes = [ctypes.c_void_p]
        lib.tm_trace_length.restype = ctypes.c_int64
        lib.tm_trace_copy.argtypes = [ctypes.c_void_p, _I64P]
        if lib.tm_n_fields() != len(decode.FIELDS) or lib.tm_n_params() != len(_PARAMS):
            raise RuntimeError(f"{path}: model fields/params differ from sim/timing/decode.py")
        self.lib = lib
        self.n_results = int(lib.tm_n_results())

    @classmethod
    def load(cls) -> _Library:
        path = build.library()
        if path not in cls._loaded:
            cls._loaded[path] = cls(path)
        return cls._loaded[path]


@dataclass(frozen=True)
class _Prepared:
    cols: decode.Columns
    rows: np.ndarray
    functional: dict[str, int]
    uops: int  # micro-op iterations, reset GEMMs included: a lower bound on the cycles


class TimingSimulator:
    """Backend `timing`.  `fast=False` steps long streaming reads cycle by cycle (for tests of
    the closed-form fast path; same results).  `limits` bound the work `sim.validate` lets
    through; `validate=False` keeps only the checks the model needs (tests of its run-time
    detectors: deadlock, FINISH too early)."""

    name = "timing"
    capabilities = Capabilities(values=False, cycles=True, traces=True)

    def __init__(self, cfg: AcceleratorConfig, *, dram_latency_cycles: int | None = None,
                 dram_bytes_per_cycle: int | None = None, max_cycles: int = DEFAULT_MAX_CYCLES,
                 fast: bool = True, limits: Limits = DEFAULT_LIMITS, validate: bool = True) -> None:
        self.config = cfg
        self.limits, self.validate = limits, validate
        self.dram_latency_cycles = check_positive(
            "dram_latency_cycles", cfg.dram_latency_cycles if dram_latency_cycles is None
            else dram_latency_cycles)
        self.dram_bytes_per_cycle = check_positive(
            "dram_bytes_per_cycle", cfg.dram_bytes_per_cycle if dram_bytes_per_cycle is None
            else dram_bytes_per_cycle)
        self.max_cycles = check_positive("max_cycles", max_cycles)
        self.fast = fast
        self._lib = _Library.load()
        self._handle = ctypes.c_void_p(self._lib.lib.tm_new())
        self._prepared: weakref.WeakKeyDictionary[Program, _Prepared] = weakref.WeakKeyDictionary()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.lib.tm_free(handle)
            handle.value = None

    def run(self, program: Program, inputs: Mapping[str, np.ndarray] | None = None) -> RunResult:
        stats, _ = self._simulate(program, trace=False)
        return RunResult({}, stats, np.zeros(0, dtype=np.uint8))

    def run_in(self, program: Program, dram: np.ndarray) -> Stats:
        """The Stats of `program` run against the caller's DRAM image (sim.backend).  The model
        computes no values: the program's output regions are zero-filled, so a caller reading
        them finds what `run` reports, no values, rather than stale data."""
        check_dram(program, dram)
        stats, _ = self._simulate(program, trace=False)
        for r in program.regions_with_role("output"):
            dram[r.offset : r.offset + r.nbytes] = 0
        return stats

    def run_traced(self, program: Program,
                   inputs: Mapping[str, np.ndarray] | None = None) -> tuple[RunResult, Activity]:
        """`run`, with the activity of every module and memory channel (`sim.trace.Activity`)."""
        stats, act = self._simulate(program, trace=True)
        return RunResult({}, stats, np.zeros(0, dtype=np.uint8)), act

    def _prepare(self, program: Program) -> _Prepared:
        """Decoded, checked rows of `program`, once per program and simulator (programs are
        immutable; a sweep runs one program under many DRAM models)."""
        prepared = self._prepared.get(program)
        if prepared is None:
            cfg = self.config
            program.check_config(cfg)
            cols = decode.columns(program, cfg)
            if self.validate:
                check_program(program, cfg, self.limits, cols)
            else:  # the checks the model itself needs (ranges it would index with)
                decode.check(cols, cfg, program.dram_bytes, lambda i: describe(program, cfg, i))
            rows = np.ascontiguousarray(decode.rows(cols, cfg))
            prepared = _Prepared(cols, rows, decode.functional_stats(cols, cfg),
                                 int(iterations(cols).sum()))
            self._prepared[program] = prepared
        return prepared

    def _simulate(self, program: Program, *, trace: bool):  # type: ignore[no-untyped-def]
        cfg = self.config
        prepared = self._prepare(program)
        cols, rows = prepared.cols, prepared.rows
        if self.validate:
            check_cycles(program, cfg, self.max_cycles, "timing", prepared.uops)
        params = np.array([
            cfg.bus_bytes, cfg.max_burst_beats, cfg.mem_inflight, self.dram_latency_cycles,
            self.dram_bytes_per_cycle, cfg.cmd_queue_depth, (1 << cfg.token_counter_bits) - 1,
            program.insn_region.offset, cols.count, cfg.out_elem_bytes, int(trace),
            self.max_cycles, int(self.fast), BURST_BOUNDARY_BYTES,
        ], dtype=np.int64)
        out = np.zeros(self._lib.n_results, dtype=np.int64)
        lib = self._lib.lib
        status = lib.tm_run(self._handle, rows.ctypes.data_as(_I64P), cols.count,
                            params.ctypes.data_as(_I64P), out.ctypes.data_as(_I64P))
        if status != _DONE:
            raise SimulationError(self._failure(status, out, program))
        stats = Stats(cycles=int(out[1]), **_timing_counters(out), **prepared.functional)
        if not trace:
            return stats, None
        raw = np.zeros(int(lib.tm_trace_length(self._handle)), dtype=np.int64)
        lib.tm_trace_copy(self._handle, raw.ctypes.data_as(_I64P))
        return stats, activity(raw, stats.cycles or 0, cols)

    def _failure(self, status: int, out: np.ndarray, program: Program) -> str:
        cfg = self.config
        if status == _CYCLE_LIMIT:
            return f"timing: no FINISH within max_cycles={self.max_cycles}"
        lines = []
        for m, name in enumerate(_MODULES):
            head, wait = int(out[9 + m]), int(out[12 + m])
            if head < 0:
                lines.append(f"  {name}: idle (queue empty)")
                continue
            what = describe(program, cfg, head)
            if wait == 4:
                why = "waiting for room in a token queue"
            elif wait >= 0:
                why = f"waiting for a {_QUEUES[wait]} token"
            else:
                why = "waiting"
            lines.append(f"  {name}: {'still holds' if status == _FINISH_EARLY else 'blocked at'} "
                         f"#{head} {what}, {why}")
        counts = " ".join(f"{q}={int(out[15 + i])}" for i, q in enumerate(("l2c", "c2l", "c2s", "s2c")))
        if status == _FINISH_EARLY:
            title = ("timing: FINISH executed before other instructions; they are not ordered "
                     "before FINISH by dependency tokens")
        else:
            title = "timing: deadlock: no module can proceed"
        return "\n".join([title, *lines, f"  token counts: {counts}"])


def _timing_counters(out: np.ndarray) -> dict[str, int]:
    names = {}
    for m, name in enumerate(_MODULES):
        names[f"{name}_busy_cycles"] = int(out[2 + m])
        names[f"{name}_stall_cycles"] = int(out[5 + m])
    names["gemm_busy_cycles"] = int(out[8])
    return names
