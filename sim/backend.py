"""The interface every backend implements: `run(program, inputs) -> RunResult(outputs, stats)`,
and `run_in(program, dram) -> Stats` against a DRAM image the caller owns; what a backend can
do beyond that is declared in its `Capabilities`, so callers ask what it can do, never its name."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from hw.config import AcceleratorConfig
from hw.errors import WorkbenchError
from hw.program import Program


class SimulationError(WorkbenchError):
    """A program fails at run time: deadlock, out-of-range access, malformed instruction."""


class InvalidProgramError(SimulationError):
    """A Program every backend refuses before running it (`sim.validate.check_program`): the
    same message, naming the same instruction, on each."""


@dataclass
class Stats:
    """Counters of one run, with the same keys on every backend.

    Cycle-level counters are None where a backend has no notion of time (fsim).  Byte counts
    are element bytes moved by the DMA (padding excluded), as VTA's fsim counts them; micro-op
    counts are executed uop iterations (reset GEMMs excluded from `gemm_uops`).
    """

    cycles: int | None = None
    load_busy_cycles: int | None = None
    load_stall_cycles: int | None = None
    compute_busy_cycles: int | None = None
    compute_stall_cycles: int | None = None
    store_busy_cycles: int | None = None
    store_stall_cycles: int | None = None
    gemm_busy_cycles: int | None = None
    gemm_uops: int = 0
    alu_uops: int = 0
    inp_load_bytes: int = 0
    wgt_load_bytes: int = 0
    acc_load_bytes: int = 0
    uop_load_bytes: int = 0
    out_store_bytes: int = 0
    load_insns: int = 0
    compute_insns: int = 0
    store_insns: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def functional(self) -> dict[str, int]:
        """The counters every fidelity must agree on exactly (no timing)."""
        return {k: v for k, v in self.to_dict().items() if not k.endswith("cycles")}

    def vta_profile(self) -> dict[str, int]:
        """The counters under VTA fsim's profiler names, for comparison with published runs."""
        return {
            "inp_load_nbytes": self.inp_load_bytes, "wgt_load_nbytes": self.wgt_load_bytes,
            "acc_load_nbytes": self.acc_load_bytes, "uop_load_nbytes": self.uop_load_bytes,
            "out_store_nbytes": self.out_store_bytes, "gemm_counter": self.gemm_uops,
            "alu_counter": self.alu_uops,
        }


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond `run`: `values`, it computes output values (so they can be
    compared exactly; the timing model moves no data); `cycles`, it counts cycles; `traces`, it
    records the activity of every module (`run_traced`); `signals`, it can dump the design's
    signals as VCD; `seeded`, its run takes a `seed` option choosing among legal interleavings."""

    values: bool
    cycles: bool
    traces: bool = False
    signals: bool = False
    seeded: bool = False


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    stats: Stats
    dram: np.ndarray  # the final DRAM image


class Backend(Protocol):
    """What a simulator (fsim, timing, rtl) offers."""

    name: str
    config: AcceleratorConfig
    capabilities: ClassVar[Capabilities]

    def run(self, program: Program, inputs: Mapping[str, np.ndarray]) -> RunResult: ...

    def run_in(self, program: Program, dram: np.ndarray) -> Stats:
        """Run `program` against `dram`, a caller-owned DRAM image (1-D uint8, at least
        `program.dram_bytes`) that already holds its instructions, micro-ops and inputs and is
        updated in place: several programs share one image (compiler.runtime.arena)."""
        ...


class TracingBackend(Backend, Protocol):
    """A backend whose `capabilities.traces` holds."""

    def run_traced(self, program: Program, inputs: Mapping[str, np.ndarray]) -> tuple[RunResult, Any]:
        """`run`, with the activity of every module and memory channel (`sim.trace.Activity`)."""
        ...


def check_dram(program: Program, dram: np.ndarray) -> None:
    """`dram` can serve as `program`'s DRAM image in place (TypeError or SimulationError)."""
    if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
        raise TypeError("dram must be a 1-D uint8 numpy array")
    if not dram.flags.c_contiguous or not dram.flags.writeable:
        raise TypeError("dram must be contiguous and writeable: the run updates it in place")
    if dram.size < program.dram_bytes:
        raise SimulationError(f"the DRAM image has {dram.size} bytes, the program needs {program.dram_bytes}")
