"""The ISA conformance suite, written once against the backend interface.

Each case builds a Program for a config with its numpy reference (written here, independently of
any simulator) and the functional counters it must report.  `run_suite(backend)` runs every case
on any backend (fsim, timing, rtl) unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.program import Program, ProgramBuilder, ProgramError, Region
from sim.backend import Backend, RunResult, SimulationError
from sim.scratchpads import int_dtype
from sim.workloads import GemmTiling, blocked_gemm

_N = 8  # accumulator elements used by the ALU cases


@dataclass
class CaseProgram:
    program: Program
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)  # functional counters that must match
    error: str | None = None  # regex the SimulationError must match, for failing programs


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[AcceleratorConfig], CaseProgram]


@dataclass
class CaseResult:
    name: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass
class SuiteReport:
    backend: str
    config: str
    results: list[CaseResult]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "config": self.config,
                "results": [r.to_json() for r in self.results],
                "passed": self.passed, "failed": self.failed}


def attempt(backend: Backend, case: Case) -> tuple[CaseProgram, RunResult] | CaseResult:
    """Build and run `case`: the program and its result, or the verdict when the case ended
    there (it did not build, or it raised, as expected or not, or it did not raise)."""
    try:
        built = case.build(backend.config)
    except (ProgramError, ValueError) as exc:
        return CaseResult(case.name, False, f"could not build: {exc}")
    try:
        result = backend.run(built.program, built.inputs)
    except SimulationError as exc:
        if built.error and re.search(built.error, str(exc)):
            return CaseResult(case.name, True)
        return CaseResult(case.name, False, f"SimulationError: {exc}")
    if built.error:
        return CaseResult(case.name, False, f"expected an error matching {built.error!r}")
    return built, result


def run_case(backend: Backend, case: Case) -> CaseResult:
    outcome = attempt(backend, case)
    if isinstance(outcome, CaseResult):
        return outcome
    built, result = outcome
    return _compare(case.name, built, result.outputs, result.stats.functional())


def _compare(name: str, built: CaseProgram, outputs: dict, stats: dict) -> CaseResult:
    for key, want in built.expected.items():
        got = outputs.get(key)
        if got is None or got.shape != want.shape or not np.array_equal(got, want):
            where = "missing" if got is None else _first_difference(got, want)
            return CaseResult(name, False, f"output {key!r} differs: {where}")
    for key, count in built.stats.items():
        if stats.get(key) != count:
            return CaseResult(name, False, f"stat {key} is {stats.get(key)}, expected {count}")
    return CaseResult(name, True)


def _first_difference(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    index = tuple(int(i) for i in np.argwhere(got != want)[0])
    return f"first at {index}: got {got[index]}, expected {want[index]}"


def run_suite(backend: Backend, names: list[str] | None = None) -> SuiteReport:
    selected = [c for c in CASES if names is None or c.name in names]
    return SuiteReport(backend.name, backend.config.name,
                       [run_case(backend, c) for c in selected])


# -- numpy references ---------------------------------------------------------------------------


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to `bits`."""
    values = np.asarray(values, dtype=np.int64) & ((1 << bits) - 1)
    return np.where(values >= 1 << (bits - 1), values - (1 << bits), values)


def alu_reference(op: isa.AluOp, a: np.ndarray, b: np.ndarray | np.integer | int,
                  acc_bits: int) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if op == isa.AluOp.SHR:
        width = acc_bits.bit_length()  # log2(acc_bits) + 1 bits of b, signed
        amount = wrap(b, width)
        result = np.where(amount >= 0, a >> np.clip(amount, 0, None), a << np.clip(-amount, 0, None))
    else:
        fn = {isa.AluOp.MIN: np.minimum, isa.AluOp.MAX: np.maximum,
              isa.AluOp.ADD: np.add, isa.AluOp.MUL: np.multiply}[op]
        result = fn(a, b)
    return wrap(result, acc_bits)


# -- building blocks ----------------------------------------------------------------------------


class _Writer:
    """A ProgramBuilder with the token choreography the cases share."""

    def __init__(self, cfg: AcceleratorConfig, seed: int) -> None:
        self.cfg, self.b = cfg, ProgramBuilder(cfg)
        self.rng = np.random.default_rng(seed)
        self.acc_shape = (cfg.batch, cfg.block_out)
        self.out_lent = False  # a STORE holds the out buffer until compute pops its token

    def acc_input(self, name: str, rows: int, cols: int, low: int, high: int) -> tuple[Region, np.ndarray]:
        data = self.rng.integers(low, high, (rows, cols, *self.acc_shape), endpoint=True)
        data = data.astype(int_dtype(self.cfg.acc_bits))
        return self.b.region(name, data.shape, data.dtype, "input"), data

    def out_region(self, name: str, rows: int, cols: int) -> Region:
        return self.b.region(name, (rows, cols, *self.acc_shape), int_dtype(self.cfg.out_bits), "output")

    def reclaim(self) -> bool:
        """Whether the next compute instruction must pop the store's token (and so it will)."""
        lent, self.out_lent = self.out_lent, False
        return lent

    def store(self, region: Region, sram_base: int, y: int, x: int, x_stride: int | None = None) -> None:
        """Hand the out buffer to store (compute NOP push), store, and hand it back."""
        self.b.nop(isa.Module.COMPUTE, push_next=True, pop_next=self.reclaim())
        self.b.store(region, sram_base, y_size=y, x_size=x, x_stride=x_stride,
                     pop_prev=True, push_prev=True)
        self.out_lent = True

    def observe(self, name: str, n: int, values: np.ndarray) -> dict[str, np.ndarray]:
        """Store acc[0:n] byte by byte (SHR 8 between stores); returns the expected outputs."""
        expected = {}
        for k in range(self.cfg.acc_bits // self.cfg.out_bits):
            if k:
                self.alu_loop(isa.AluOp.SHR, n, imm=self.cfg.out_bits, pop_next=self.reclaim())
            region = self.out_region(f"{name}{k}", 1, n)
            self.store(region, 0, 1, n)
            shifted = np.asarray(values, dtype=np.int64) >> (k * self.cfg.out_bits)
            low = wrap(shifted, self.cfg.out_bits).astype(int_dtype(self.cfg.out_bits))
            expected[region.name] = low.reshape(region.shape)
        return expected

    def alu_loop(self, op: isa.AluOp, n: int, *, imm: int | None = None, src: int = 0,
                 **flags: bool) -> None:
        """acc[d] = op(acc[d], imm or acc[d + src]) for d < n, through both loop levels."""
        half = n // 2
        span = self.b.uops([isa.Uop(dst=0, src=src)])
        self.b.load_uops(span, sram_base=span.begin)
        self.b.alu(uop_bgn=span.begin, uop_end=span.begin + 1, iter_out=2, iter_in=half,
                   dst_factor_out=half, dst_factor_in=1, src_factor_out=half, src_factor_in=1,
                   alu_opcode=op, use_imm=imm is not None, imm=imm or 0, **flags)

    def finish(self) -> Program:
        self.b.finish(pop_next=self.reclaim())
        return self.b.build()


def _acc_load(w: _Writer, region: Region, sram_base: int, y: int, x: int, stride: int,
              pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:
    w.b.load(isa.MemType.ACC, region, sram_base, y_size=y, x_size=x, x_stride=stride, pads=pads)


def _int8_input(w: _Writer, name: str, rows: int, cols: int) -> tuple[Region, np.ndarray]:
    """An inp_bits tensor of acc-tile elements for LOAD ACC_8BIT, with both extremes and -1."""
    bits = w.cfg.inp_bits
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    data = w.rng.integers(low, high, (rows, cols, *w.acc_shape), endpoint=True)
    data.reshape(-1)[:3] = (low, high, -1)
    data = data.astype(int_dtype(bits))
    return w.b.region(name, data.shape, data.dtype, "input"), data


# -- the cases -------------------------------------------------------------------------------------


def _load_store(cfg: AcceleratorConfig) -> CaseProgram:
    w = _Writer(cfg, 1)
    src, data = w.acc_input("src", 3, 8, -(1 << 31), (1 << 31) - 1)
    _acc_load(w, src, 0, 3, 5, 8)
    out = w.out_region("out", 3, 6)
    w.store(out, 0, 3, 5, x_stride=6)
    expected = np.zeros(out.shape, dtype=int_dtype(cfg.out_bits))
    expected[:, :5] = wrap(data[:, :5], cfg.out_bits)
    stats = {"acc_load_bytes": 15 * cfg.acc_elem_bytes, "out_store_bytes": 15 * cfg.out_elem_bytes,
             "store_insns": 1, "compute_insns": 3}
    return CaseProgram(w.finish(), {"src": data}, {"out": expected}, stats)


def _padded_load(pads: tuple[int, int, int, int]) -> Callable[[AcceleratorConfig], CaseProgram]:
    def build(cfg: AcceleratorConfig) -> CaseProgram:
        w = _Writer(cfg, sum(pads))
        y0, y1, x0, x1 = pads
        src, data = w.acc_input("src", 2, 3, -100, 100)
        _acc_load(w, src, 0, 2, 3, 3, pads)
        rows, cols = y0 + 2 + y1, x0 + 3 + x1
        out = w.out_region("out", rows, cols)
        w.store(out, 0, rows, cols)
        expected = np.zeros(out.shape, dtype=int_dtype(cfg.out_bits))
        expected[y0 : y0 + 2, x0 : x0 + 3] = data
        stats = {"acc_load_bytes": 6 * cfg.acc_elem_bytes}
        return CaseProgram(w.finish(), {"src": data}, {"out": expected}, stats)

    return build


def _gemm_case(*, reset: bool, pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Callable:
    """acc (bias) then GEMM over a 2x2 grid of outputs with K=3 blocks, inp optionally padded."""

    def build(cfg: AcceleratorConfig) -> CaseProgram:
        w = _Writer(cfg, 7 + reset)
        b, rng = w.b, w.rng
        y0, y1, x0, x1 = pads
        rows, cols = 1 + y0 + y1, 3 + x0 + x1  # inp tile after padding: `rows` x `cols` elements
        inp = rng.integers(-128, 128, (1, 3, cfg.batch, cfg.block_in)).astype(int_dtype(cfg.inp_bits))
        wgt = rng.integers(-128, 128, (2, cols, cfg.block_out, cfg.block_in)).astype(int_dtype(cfg.wgt_bits))
        bias_r, bias = w.acc_input("bias", rows, 2, -1000, 1000)
        inp_r = b.region("inp", inp.shape, inp.dtype, "input")
        wgt_r = b.region("wgt", wgt.shape, wgt.dtype, "input")
        b.load(isa.MemType.INP, inp_r, 0, y_size=1, x_size=3, pads=pads)
        b.load(isa.MemType.WGT, wgt_r, 0, y_size=2, x_size=cols, push_next=True)
        _acc_load(w, bias_r, 0, rows, 2, 2)
        # Same-dst micro-ops back to back (k innermost) exercise the accumulator hazard.
        span = b.uops([isa.Uop(dst=n, src=k, wgt=n * cols + k) for n in range(2) for k in range(cols)])
        b.load_uops(span)
        b.gemm(reset=reset, uop_bgn=0, uop_end=span.count, iter_out=rows, dst_factor_out=2,
               src_factor_out=cols, pop_prev=True)
        out = w.out_region("out", rows, 2)
        w.store(out, 0, rows, 2)
        a = np.zeros((rows, cols, cfg.batch, cfg.block_in), dtype=np.int64)
        a[y0 : y0 + 1, x0 : x0 + 3] = inp
        c = np.einsum("ykbi,nkoi->ynbo", a, wgt.astype(np.int64)) + bias
        c = np.zeros_like(c) if reset else c
        expected = wrap(wrap(c, cfg.acc_bits), cfg.out_bits).astype(int_dtype(cfg.out_bits))
        stats = {"gemm_uops": 0 if reset else rows * 2 * cols, "inp_load_bytes": 3 * cfg.inp_elem_bytes}
        return CaseProgram(w.finish(), {"inp": inp, "wgt": wgt, "bias": bias}, {"out": expected}, stats)

    return build


def _blocked(vt: int) -> Callable[[AcceleratorConfig], CaseProgram]:
    def build(cfg: AcceleratorConfig) -> CaseProgram:
        work = blocked_gemm(cfg, GemmTiling(4, 4, 4, 4, 2, 2, vt), seed=vt)
        return CaseProgram(work.program, work.inputs, work.expected, {"gemm_uops": 64})

    return build


def _alu(op: isa.AluOp, *, imm: int | None, low: int, high: int) -> Callable:
    def build(cfg: AcceleratorConfig) -> CaseProgram:
        w = _Writer(cfg, 100 + int(op) + (imm is None))
        src, data = w.acc_input("src", 1, 2 * _N, low, high)
        _acc_load(w, src, 0, 1, 2 * _N, 2 * _N)
        w.alu_loop(op, _N, imm=imm, src=0 if imm is not None else _N)
        a = data[0, :_N]
        b = np.int64(imm) if imm is not None else data[0, _N:]
        expected = w.observe("out", _N, alu_reference(op, a, b, cfg.acc_bits))
        shifts = _N * (cfg.acc_bits // cfg.out_bits - 1)  # observe() shifts between stores
        return CaseProgram(w.finish(), {"src": data}, expected, {"alu_uops": _N + shifts})

    return build


def _prefix_sum(cfg: AcceleratorConfig) -> CaseProgram:
    """acc[i] += acc[i-1] in order: each iteration reads the previous one's result."""
    w = _Writer(cfg, 5)
    src, data = w.acc_input("src", 1, _N, -1000, 1000)
    _acc_load(w, src, 0, 1, _N, _N)
    span = w.b.uops([isa.Uop(dst=1, src=0)])
    w.b.load_uops(span, sram_base=span.begin)
    w.b.alu(uop_bgn=span.begin, uop_end=span.begin + 1, iter_out=_N - 1, dst_factor_out=1,
            src_factor_out=1, alu_opcode=isa.AluOp.ADD)
    expected = w.observe("out", _N, np.cumsum(data[0].astype(np.int64), axis=0))
    shifts = _N * (cfg.acc_bits // cfg.out_bits - 1)
    return CaseProgram(w.finish(), {"src": data}, expected, {"alu_uops": _N - 1 + shifts})


def _acc_8bit_padded(cfg: AcceleratorConfig) -> CaseProgram:
    """LOAD ACC_8BIT with padding, a row stride and a DRAM offset over acc already holding int32
    values: every acc byte is observed, so sign extension and the zero padding both show."""
    w = _Writer(cfg, 11)
    (y0, y1, x0, x1), y, x, base = (1, 1, 2, 1), 2, 3, 3
    rows, cols = y0 + y + y1, x0 + x + x1
    n = base + rows * cols + 3  # acc[0:n] observed: the window and int32 values around it
    old, old_data = w.acc_input("old", 1, n, -(1 << 31), (1 << 31) - 1)
    _acc_load(w, old, 0, 1, n, n)
    src, data = _int8_input(w, "src", 3, 5)
    w.b.load(isa.MemType.ACC_8BIT, src, base, y_size=y, x_size=x, x_stride=5, elem_offset=1,
             pads=(y0, y1, x0, x1))
    window = np.zeros((rows, cols, *w.acc_shape), dtype=np.int64)
    window[y0 : y0 + y, x0 : x0 + x] = data[:2, 1 : 1 + x]  # elements 1.. of rows 0 and 1
    acc = old_data[0].astype(np.int64)
    acc[base : base + rows * cols] = window.reshape(-1, *w.acc_shape)
    expected = w.observe("out", n, acc)
    stats = {"acc_load_bytes": n * cfg.acc_elem_bytes + y * x * cfg.acc_8bit_elem_bytes,
             "alu_uops": n * (cfg.acc_bits // cfg.out_bits - 1)}
    return CaseProgram(w.finish(), {"old": old_data, "src": data}, expected, stats)


def _acc_8bit_add(cfg: AcceleratorConfig) -> CaseProgram:
    """A residual add: int32 acc values plus an int8 tensor brought in by LOAD ACC_8BIT."""
    w = _Writer(cfg, 12)
    acc_r, acc = w.acc_input("acc", 1, _N, -(1 << 31), (1 << 31) - 1)
    res_r, res = _int8_input(w, "res", 1, _N)
    _acc_load(w, acc_r, 0, 1, _N, _N)
    w.b.load(isa.MemType.ACC_8BIT, res_r, _N, y_size=1, x_size=_N)
    w.alu_loop(isa.AluOp.ADD, _N, src=_N)
    total = alu_reference(isa.AluOp.ADD, acc[0], res[0], cfg.acc_bits)
    expected = w.observe("out", _N, total)
    shifts = _N * (cfg.acc_bits // cfg.out_bits - 1)
    stats = {"acc_load_bytes": _N * (cfg.acc_elem_bytes + cfg.acc_8bit_elem_bytes),
             "alu_uops": _N + shifts}
    return CaseProgram(w.finish(), {"acc": acc, "res": res}, expected, stats)


def _deadlock(cfg: AcceleratorConfig) -> CaseProgram:
    """Load waits for compute's token while compute waits for load's: no progress is possible."""
    b = ProgramBuilder(cfg)
    b.nop(isa.Module.LOAD, pop_next=True, push_next=True)
    b.nop(isa.Module.COMPUTE, pop_prev=True, push_prev=True)
    b.finish()
    return CaseProgram(b.build(check_tokens=False), {}, error=r"deadlock")


_M = 1 << 31
CASES: list[Case] = [
    Case("load_store_roundtrip", _load_store),
    *[Case(f"padded_load_{name}", _padded_load(p)) for name, p in (
        ("y_pad_0", (2, 0, 0, 0)), ("y_pad_1", (0, 1, 0, 0)), ("x_pad_0", (0, 0, 3, 0)),
        ("x_pad_1", (0, 0, 0, 2)), ("all", (1, 2, 2, 1)))],
    Case("gemm_accumulate", _gemm_case(reset=False)),
    Case("gemm_reset", _gemm_case(reset=True)),
    Case("gemm_padded_inp", _gemm_case(reset=False, pads=(1, 1, 1, 2))),
    Case("blocked_gemm_1_thread", _blocked(1)),
    Case("blocked_gemm_2_threads", _blocked(2)),
    Case("alu_min_imm", _alu(isa.AluOp.MIN, imm=-5, low=-_M, high=_M - 1)),
    Case("alu_min_tensor", _alu(isa.AluOp.MIN, imm=None, low=-_M, high=_M - 1)),
    Case("alu_max_imm", _alu(isa.AluOp.MAX, imm=77, low=-_M, high=_M - 1)),
    Case("alu_max_tensor", _alu(isa.AluOp.MAX, imm=None, low=-_M, high=_M - 1)),
    Case("alu_add_imm", _alu(isa.AluOp.ADD, imm=-32768, low=-_M, high=_M - 1)),
    Case("alu_add_tensor", _alu(isa.AluOp.ADD, imm=None, low=-_M, high=_M - 1)),
    Case("alu_shr_imm", _alu(isa.AluOp.SHR, imm=5, low=-_M, high=_M - 1)),
    Case("alu_shr_tensor", _alu(isa.AluOp.SHR, imm=None, low=-40, high=40)),
    Case("alu_mul_imm", _alu(isa.AluOp.MUL, imm=-3001, low=-(1 << 20), high=1 << 20)),
    Case("alu_mul_tensor", _alu(isa.AluOp.MUL, imm=None, low=-(1 << 20), high=1 << 20)),
    Case("alu_shift_left", _alu(isa.AluOp.SHR, imm=-3, low=-(1 << 30), high=(1 << 30) - 1)),
    Case("relu", _alu(isa.AluOp.MAX, imm=0, low=-1000, high=1000)),
    Case("alu_sequential_prefix_sum", _prefix_sum),
    Case("acc_8bit_load_padded", _acc_8bit_padded),
    Case("acc_8bit_residual_add", _acc_8bit_add),
    Case("deadlock", _deadlock),
]
