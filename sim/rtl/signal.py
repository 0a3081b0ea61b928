"""Signal-level simulation through pyverilator: step cycles, peek and poke ports, write a VCD.

About 100x slower than `RtlSimulator` (Python drives every port every cycle), for debugging:
`SignalSim.run(..., vcd_path=...)` runs a program under the same DRAM model as the C++ harness
(sim/rtl/dram.py), cycle for cycle, and dumps every signal of the design.
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from hw.cache import CacheEntry, cache_root
from hw.config import AcceleratorConfig
from hw.program import Program
from hw.verilog import DesignFactory, verilog_for
from sim.backend import RunResult, SimulationError, Stats
from sim.rtl.backend import DEFAULT_MAX_CYCLES, check_positive, cycle_limit_message
from sim.rtl.build import BuildError, verilator_version
from sim.rtl.dram import DramModel, Request
from sim.rtl.ports import COUNTER_FIELDS, check_ports, verilog_ports

PYVERILATOR_ARGS = ["-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "--top-module", "accel"]
_REQUEST_PORTS = ("ar_valid", "ar_addr", "ar_len", "r_ready", "aw_valid", "aw_addr", "aw_len",
                  "w_valid", "w_data", "w_strb", "w_last")


def model_for(cfg: AcceleratorConfig, design: DesignFactory | None = None) -> Path:
    """The pyverilator shared object for `cfg`, built once per config and design (cached)."""
    text = verilog_for(cfg, design).read_text()
    digest = hashlib.sha256((text + verilator_version() + " ".join(PYVERILATOR_ARGS)).encode())
    key = f"{cfg.fingerprint()}-{digest.hexdigest()[:12]}"
    entry = CacheEntry(cache_root() / "pyverilator" / key, "Vaccel")
    if not entry.is_complete():
        check_ports(text, cfg)  # before the lock and the build: a mismatch fails in a moment
    return entry.get_or_build(lambda tmp: _build_model(cfg, text, tmp))


def _build_model(cfg: AcceleratorConfig, text: str, tmp: Path) -> None:
    """Build the pyverilator model (its shared object is `Vaccel`) into the temporary `tmp`."""
    import pyverilator

    (tmp / "accel.v").write_text(text)
    try:
        pyverilator.PyVerilator.build(str(tmp / "accel.v"), build_dir=str(tmp), quiet=True,
                                      args=PYVERILATOR_ARGS)
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"pyverilator build of config {cfg.name} failed: {exc}") from None


class SignalSim:
    """One pyverilator instance of `accel` with the clock under Python control.

    `step()` is one clock cycle (clk low, eval, clk high, eval).  Ports are read and written by
    their Verilog names (`peek("mem_ar_addr")`, `poke("start", 1)`); writes take effect at the
    next eval.
    """

    def __init__(self, cfg: AcceleratorConfig, *, design: DesignFactory | None = None,
                 dram_latency_cycles: int | None = None,
                 dram_bytes_per_cycle: int | None = None) -> None:
        import pyverilator

        self.config = cfg
        self.dram_latency_cycles = check_positive("dram_latency_cycles", cfg.dram_latency_cycles
            if dram_latency_cycles is None else dram_latency_cycles)
        self.dram_bytes_per_cycle = check_positive("dram_bytes_per_cycle", cfg.dram_bytes_per_cycle
            if dram_bytes_per_cycle is None else dram_bytes_per_cycle)
        self.model = pyverilator.PyVerilator(str(model_for(cfg, design)))
        self.ports = verilog_ports(verilog_for(cfg, design).read_text())
        self._lib = self.model.lib
        self._handle = ctypes.c_void_p(self.model.model)
        self._eval = self._lib.eval
        self._eval.argtypes = [ctypes.c_void_p]
        self._getters: dict[str, Callable[[], int]] = {}
        self._setters: dict[str, Callable[[int], None]] = {}
        self._trace: int | None = None
        self.time = 0

    # -- ports ----------------------------------------------------------------------------------
    def peek(self, name: str) -> int:
        if name not in self._getters:
            self._getters[name] = self._bind_get(name)
        return self._getters[name]()

    def poke(self, name: str, value: int) -> None:
        if name not in self._setters:
            self._setters[name] = self._bind_set(name)
        self._setters[name](value)

    def _width(self, name: str, direction: str | None = None) -> int:
        if name not in self.ports or (direction and self.ports[name][0] != direction):
            kind = "input port" if direction == "in" else "port"
            raise KeyError(f"accel has no {kind} {name!r}; ports: {', '.join(sorted(self.ports))}")
        return self.ports[name][1]

    def _bind_get(self, name: str) -> Callable[[], int]:
        width, fn, h = self._width(name), getattr(self._lib, f"get_{name}"), self._handle
        if width <= 64:
            fn.argtypes = [ctypes.c_void_p]
            fn.restype = ctypes.c_uint64 if width > 32 else ctypes.c_uint32
            return lambda: int(fn(h))
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
        fn.restype = ctypes.c_uint32
        words = range((width + 31) // 32)
        return lambda: sum(int(fn(h, i)) << (32 * i) for i in words)

    def _bind_set(self, name: str) -> Callable[[int], None]:
        width, fn, h = self._width(name, "in"), getattr(self._lib, f"set_{name}"), self._handle
        if width <= 64:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64 if width > 32 else ctypes.c_uint32]
            return lambda value: fn(h, value)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        words = range((width + 31) // 32)

        def write(value: int) -> None:
            for i in words:
                fn(h, i, (value >> (32 * i)) & 0xFFFFFFFF)

        return write

    # -- clock and trace ------------------------------------------------------------------------
    def eval(self) -> None:
        self._eval(self._handle)

    def step(self, cycles: int = 1) -> None:
        for _ in range(cycles):
            self._half(0)
            self._half(1)

    def _half(self, clk: int) -> None:
        self.poke("clk", clk)
        self._eval(self._handle)
        self._dump()

    def _dump(self) -> None:
        if self._trace is not None:
            self._lib.add_to_vcd_trace(ctypes.c_void_p(self._trace), ctypes.c_int(self.time))
        self.time += 5

    def reset(self) -> None:
        """Hold rst for two cycles with every input at 0."""
        for name, (direction, _) in self.ports.items():
            if direction == "in":
                self.poke(name, 0)
        self.poke("rst", 1)
        self.step(2)
        self.poke("rst", 0)

    def open_vcd(self, path: str | Path) -> None:
        """Dump every signal at every clock edge to `path` until `close_vcd()`."""
        if self._trace is not None:
            raise ValueError("a VCD trace is already open; close_vcd() it first")
        fn = self._lib.start_vcd_trace
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        fn.restype = ctypes.c_void_p
        self._trace = fn(self._handle, str(path).encode())

    def close_vcd(self) -> None:
        if self._trace is not None:
            self._lib.stop_vcd_trace(ctypes.c_void_p(self._trace))
            self._trace = None

    # -- runs -----------------------------------------------------------------------------------
    def stats(self) -> Stats:
        return Stats(**{name: self.peek(f"cnt_{name}") for name in COUNTER_FIELDS})

    def run(self, program: Program, inputs: Mapping[str, np.ndarray], *,
            max_cycles: int = DEFAULT_MAX_CYCLES,
            vcd_path: str | Path | None = None) -> RunResult:
        program.check_config(self.config)
        dram = program.initial_dram(inputs)
        insns = program.insn_region
        stats = self.run_image(dram, insns.offset, insns.shape[0], max_cycles=max_cycles,
                               vcd_path=vcd_path)
        return RunResult(program.read_outputs(dram), stats, dram)

    def run_image(self, dram: np.ndarray, insn_addr: int, insn_count: int, *,
                  max_cycles: int = DEFAULT_MAX_CYCLES,
                  vcd_path: str | Path | None = None) -> Stats:
        """As `RtlSimulator.run_image`, with the same DRAM model and the same cycle counts."""
        if vcd_path is not None:
            self.open_vcd(vcd_path)
        try:
            return self._run(dram, insn_addr, insn_count, max_cycles)
        finally:
            self.close_vcd()

    def _run(self, dram: np.ndarray, insn_addr: int, insn_count: int, max_cycles: int) -> Stats:
        cfg = self.config
        model = DramModel(dram, bus_bytes=cfg.bus_bytes, latency_cycles=self.dram_latency_cycles,
                          bytes_per_cycle=self.dram_bytes_per_cycle,
                          max_burst_beats=cfg.max_burst_beats)
        self.reset()
        self.poke("insn_addr", insn_addr)
        self.poke("insn_count", insn_count)
        now = 0
        while not (now > 0 and self.peek("done")):
            if now >= max_cycles:
                raise SimulationError(cycle_limit_message(max_cycles, self.stats(), {
                    "cycles": now, "read_beats": model.read_beats, "write_beats": model.write_beats,
                    "reads_pending": len(model.reads), "writes_pending": len(model.writes)}))
            self._cycle(model, now)
            now += 1
        return self.stats()

    def _cycle(self, model: DramModel, now: int) -> None:
        offer = model.offer(now)
        self.poke("clk", 0)
        self.poke("start", int(now == 0))
        self.poke("mem_ar_ready", offer.ar_ready)
        self.poke("mem_aw_ready", offer.aw_ready)
        self.poke("mem_r_valid", offer.r_valid)
        self.poke("mem_r_last", offer.r_last)
        self.poke("mem_w_ready", offer.w_ready)
        if offer.r_valid:
            self.poke("mem_r_data", offer.r_data)
        self._eval(self._handle)
        self._dump()
        values = {n: self.peek(f"mem_{n}") for n in _REQUEST_PORTS if not n.startswith("w_d")}
        values["w_data"] = self.peek("mem_w_data") if values["w_valid"] else 0
        model.update(now, Request(**values))  # type: ignore[arg-type]
        self._half(1)


def run_with_vcd(cfg: AcceleratorConfig, program: Program, inputs: Mapping[str, np.ndarray],
                 vcd_path: str | Path, *, max_cycles: int = DEFAULT_MAX_CYCLES,
                 design: DesignFactory | None = None) -> RunResult:
    """Run `program` at signal level and write a VCD of every signal to `vcd_path`."""
    return SignalSim(cfg, design=design).run(program, inputs, max_cycles=max_cycles,
                                             vcd_path=vcd_path)
