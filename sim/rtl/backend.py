"""`RtlSimulator`: the `rtl` backend, the Verilated design run to completion in C++.

The harness (harness.cpp) owns the clock loop and the DRAM model; Python hands it the DRAM image
as a numpy buffer that it reads and writes in place, then turns the hardware counters into
`Stats`.  The DRAM model's latency and bandwidth are runtime parameters: one build serves every
memory model of a config.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from hw.config import BURST_BOUNDARY_BYTES, AcceleratorConfig
from hw.errors import InputError
from hw.program import Program
from hw.verilog import DesignFactory
from sim.backend import Capabilities, RunResult, SimulationError, Stats, check_dram
from sim.limits import DEFAULT_LIMITS, Limits
from sim.rtl import trace
from sim.rtl.build import library_for
from sim.rtl.ports import COUNTER_FIELDS
from sim.trace import Activity
from sim.validate import check_cycles, check_program

DEFAULT_MAX_CYCLES = 50_000_000

# Slots of the parameter and result arrays (the enums of harness.cpp).
_PARAMS = ("insn_addr", "insn_count", "latency", "bytes_per_cycle", "max_cycles", "max_burst",
           "idle_limit", "boundary")
_RESULTS = ("status", "cycles", "problem", "channel", "addr", "bytes", "beats_len",
            "reads_pending", "writes_pending", "read_beats", "write_beats")
_DONE, _CYCLE_LIMIT, _OUT_OF_BOUNDS, _PROTOCOL, _DEADLOCK = 0, 1, 2, 3, 4
_CHANNELS = ("read", "write")
_U64P = ctypes.POINTER(ctypes.c_uint64)


class _Library:
    """The ctypes view of one harness library; one per path, shared by simulators."""

    _loaded: dict[Path, _Library] = {}

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        lib.sim_new.restype = ctypes.c_void_p
        lib.sim_free.argtypes = [ctypes.c_void_p]
        lib.sim_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, _U64P, _U64P]
        lib.sim_run.restype = ctypes.c_int
        lib.sim_counter_names.restype = ctypes.c_char_p
        lib.sim_n_results.restype = ctypes.c_uint64
        lib.sim_bus_bytes.restype = ctypes.c_uint64
        lib.sim_trace_enable.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.sim_trace_length.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.sim_trace_length.restype = ctypes.c_uint64
        lib.sim_trace_copy.argtypes = [ctypes.c_void_p, ctypes.c_int, _U64P]
        names = tuple(lib.sim_counter_names().decode().strip(",").split(","))
        if names != COUNTER_FIELDS:
            raise RuntimeError(f"{path}: harness counters {names} differ from Stats {COUNTER_FIELDS}")
        self.lib = lib
        self.n_results = int(lib.sim_n_results())
        self.bus_bytes = int(lib.sim_bus_bytes())

    @classmethod
    def load(cls, path: Path) -> _Library:
        if path not in cls._loaded:
            cls._loaded[path] = cls(path)
        return cls._loaded[path]


class RtlSimulator:
    """Cycle-accurate runs of the generated RTL (Verilator), with hardware counters as Stats."""

    name = "rtl"
    capabilities = Capabilities(values=True, cycles=True, traces=True, signals=True)

    def __init__(self, cfg: AcceleratorConfig, *, max_cycles: int = DEFAULT_MAX_CYCLES,
                 dram_latency_cycles: int | None = None, dram_bytes_per_cycle: int | None = None,
                 idle_limit: int | None = None, design: DesignFactory | None = None,
                 limits: Limits = DEFAULT_LIMITS, validate: bool = True) -> None:
        """`limits` bound the work `sim.validate` lets through; `validate=False` skips those
        checks (tests of the watchdog: a malformed program then runs until a limit)."""
        self.config = cfg
        self.limits, self.validate = limits, validate
        self.max_cycles = check_positive("max_cycles", max_cycles)
        self.dram_latency_cycles = check_positive(
            "dram_latency_cycles", cfg.dram_latency_cycles if dram_latency_cycles is None
            else dram_latency_cycles)
        self.dram_bytes_per_cycle = check_positive(
            "dram_bytes_per_cycle", cfg.dram_bytes_per_cycle if dram_bytes_per_cycle is None
            else dram_bytes_per_cycle)
        # The longest legal quiet stretch is a LOAD writing padding (one element per cycle, at
        # most one SRAM's depth, 2**16) while a read waits out its latency.
        self.idle_limit = check_positive(
            "idle_limit", 2 * (1 << 16) + 4 * self.dram_latency_cycles if idle_limit is None
            else idle_limit)
        self.library_path = library_for(cfg, design)
        self._lib = _Library.load(self.library_path)
        self._handle = ctypes.c_void_p(self._lib.lib.sim_new())

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.lib.sim_free(handle)
            handle.value = None

    def run(self, program: Program, inputs: Mapping[str, np.ndarray]) -> RunResult:
        program.check_config(self.config)
        if self.validate:
            check_program(program, self.config, self.limits)
            check_cycles(program, self.config, self.max_cycles, "rtl")
        dram = program.initial_dram(inputs)
        insns = program.insn_region
        result = self.run_image(dram, insns.offset, insns.shape[0])
        return RunResult(program.read_outputs(dram), result, dram)

    def run_in(self, program: Program, dram: np.ndarray) -> Stats:
        """Run `program` against the caller's DRAM image, updated in place (sim.backend)."""
        program.check_config(self.config)
        check_dram(program, dram)
        if self.validate:
            check_program(program, self.config, self.limits)
            check_cycles(program, self.config, self.max_cycles, "rtl")
        insns = program.insn_region
        return self.run_image(dram, insns.offset, insns.shape[0])

    def run_traced(self, program: Program,
                   inputs: Mapping[str, np.ndarray]) -> tuple[RunResult, Activity]:
        """`run`, recording the activity of every module and memory channel (slower)."""
        result, rle, reads = self._run_recorded(program, inputs)
        return result, trace.activity(rle, reads, result.stats.cycles or 0, program, self.config)

    def run_read_requests(self, program: Program,
                          inputs: Mapping[str, np.ndarray]) -> tuple[RunResult, np.ndarray]:
        """`run`, with every read request the DRAM model accepted: rows of (cycle, byte
        address, len = beats - 1), in order."""
        result, _, reads = self._run_recorded(program, inputs)
        return result, reads.reshape(-1, 3).astype(np.int64)

    def _run_recorded(self, program: Program, inputs: Mapping[str, np.ndarray]
                      ) -> tuple[RunResult, np.ndarray, np.ndarray]:
        self._lib.lib.sim_trace_enable(self._handle, 1)
        try:
            result = self.run(program, inputs)
        finally:
            self._lib.lib.sim_trace_enable(self._handle, 0)
        rle, reads = (self._trace_part(part) for part in (0, 1))
        return result, rle, reads

    def _trace_part(self, part: int) -> np.ndarray:
        out = np.zeros(int(self._lib.lib.sim_trace_length(self._handle, part)), dtype=np.uint64)
        self._lib.lib.sim_trace_copy(self._handle, part, out.ctypes.data_as(_U64P))
        return out

    def run_image(self, dram: np.ndarray, insn_addr: int, insn_count: int) -> Stats:
        """Run the instructions at byte `insn_addr` of `dram` (uint8, updated in place)."""
        if dram.dtype != np.uint8 or dram.ndim != 1 or not dram.flags.c_contiguous:
            raise TypeError("dram must be a 1-D contiguous uint8 array")
        if not dram.flags.writeable:
            raise TypeError("dram must be writeable: the harness updates it in place")
        params = np.array([insn_addr, insn_count, self.dram_latency_cycles,
                           self.dram_bytes_per_cycle, self.max_cycles, self.config.max_burst_beats,
                           self.idle_limit, BURST_BOUNDARY_BYTES], dtype=np.uint64)
        out = np.zeros(self._lib.n_results, dtype=np.uint64)
        status = self._lib.lib.sim_run(self._handle, dram.ctypes.data, dram.size,
                                       params.ctypes.data_as(_U64P), out.ctypes.data_as(_U64P))
        info = {name: int(out[i]) for i, name in enumerate(_RESULTS)}
        counters = [int(v) for v in out[len(_RESULTS) : len(_RESULTS) + len(COUNTER_FIELDS)]]
        stats = Stats(**dict(zip(COUNTER_FIELDS, counters, strict=True)))
        if status != _DONE:
            raise SimulationError(self._describe(status, info, stats, dram.size))
        retired = stats.load_insns + stats.compute_insns + stats.store_insns
        if retired < insn_count:
            raise SimulationError(
                f"rtl: FINISH executed before other instructions ({retired} of {insn_count} "
                "retired); they are not ordered before FINISH by dependency tokens")
        return stats

    def _describe(self, status: int, info: dict[str, int], stats: Stats, dram_bytes: int) -> str:
        channel = _CHANNELS[info["channel"]]
        request = f"{channel} of {info['bytes']} bytes at address {info['addr']:#x}"
        if status == _CYCLE_LIMIT:
            return cycle_limit_message(self.max_cycles, stats, info)
        if status == _DEADLOCK:
            return deadlock_message(self.idle_limit, stats, info)
        if status == _OUT_OF_BOUNDS:
            return f"rtl: {request} is outside the {dram_bytes}-byte DRAM image (cycle {info['cycles']})"
        problems = {
            1: f"{request} is not aligned to the {self._lib.bus_bytes}-byte bus",
            2: f"{request} has {info['beats_len'] + 1} beats, more than max_burst_beats="
            f"{self.config.max_burst_beats}",
            3: "write data beat without a preceding write address (AW)",
            4: f"w_last wrong on beat {info['beats_len']} of the {request}",
            5: f"{request} crosses a {BURST_BOUNDARY_BYTES}-byte boundary",
        }
        text = problems.get(info["problem"], f"unknown problem {info['problem']}")
        return f"rtl: memory protocol violation at cycle {info['cycles']}: {text}"


def cycle_limit_message(max_cycles: int, stats: Stats, info: Mapping[str, int]) -> str:
    """The error of a run that hit its cycle limit, with the progress it made."""
    return (
        f"rtl: no FINISH within max_cycles={max_cycles} (ran {info['cycles']} cycles): a "
        f"deadlock, or raise the limit; {_progress(stats, info)}"
    )


def deadlock_message(idle_limit: int, stats: Stats, info: Mapping[str, int]) -> str:
    """The error of a run in which nothing happened for `idle_limit` cycles."""
    return (
        f"rtl: deadlock at cycle {info['cycles']}: no instruction retired, no micro-op ran and "
        f"no bus beat moved for {idle_limit} cycles; {_progress(stats, info)}"
    )


def _progress(stats: Stats, info: Mapping[str, int]) -> str:
    return (
        f"progress: {stats.load_insns} load, {stats.compute_insns} compute, "
        f"{stats.store_insns} store instructions done, {info['read_beats']} read and "
        f"{info['write_beats']} write beats, {info['reads_pending']} reads and "
        f"{info['writes_pending']} writes pending"
    )


def check_positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} {value!r}")
    if value < 1:
        raise InputError(f"{name} must be at least 1, not {value}")
    return value
