"""Element-wise int8 operators on the ALU: the residual add of two tensors (with clip), and
clip/ReLU of one tensor.  Both operands reach the acc scope through the sign-extending 8-bit
accumulator load (MEM_ID_ACC_8BIT); layout NCHW{batch}n{block_out}c = (N/b, C/co, H, W, b, co).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.accel.common import (
    IMM_MAX,
    check_knobs,
    default_point,
    divisors,
    grid,
    load_into_acc,
    load_vector,
    wrap32,
)
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder
from hw.errors import InputError

INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class EltwiseSpec:
    """`add`: clip((a * mult_a + b * mult_b + rounding) >> shift); `clip`: the same without b.
    The multipliers rescale two int8 tensors of different scales onto the output's (a residual
    connection of a quantized network); with shift 0 and multipliers 1 it is clip(a + b).  Every
    step wraps at 32 bits like the accumulator.  Shapes in NCHW, channels padded to blocks.

    A multiplier beyond the ALU's 16-bit immediate is a vector input (`mult_a`/`mult_b`, every
    element that multiplier, loaded into acc once).  The rounding of a shift beyond 16 takes two
    steps, exact when a * mult_a + b * mult_b + 2**(shift - 1) does not wrap (128 * (|mult_a| +
    |mult_b|) + 2**(shift - 1) < 2**31 guarantees it)."""

    kind: str
    batch: int
    channels: int
    height: int
    width: int
    clip: tuple[int, int] = (-128, 127)
    mult_a: int = 1
    mult_b: int = 1
    shift: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("add", "clip"):
            raise InputError(f"element-wise kind must be add or clip, not {self.kind!r}")
        if min(self.batch, self.channels, self.height, self.width) < 1:
            raise InputError("element-wise shape must be positive")
        if not 0 <= self.shift <= 31:
            raise InputError(f"element-wise shift must be in [0, 31], not {self.shift}")
        if self.kind == "clip" and self.mult_b != 1:
            raise InputError("element-wise clip has one operand: mult_b does not apply")
        for name in ("mult_a", "mult_b"):
            if abs(getattr(self, name)) > INT32_MAX:
                raise InputError(f"element-wise {name} {getattr(self, name)} does not fit int32")

    @property
    def vectors(self) -> tuple[str, ...]:
        """The multipliers beyond an ALU immediate, as vector inputs."""
        return tuple(n for n in ("mult_a", "mult_b") if abs(getattr(self, n)) > IMM_MAX)


@dataclass(frozen=True)
class EltwiseKnobs:
    tile_h: int = 1
    threads: int = 1

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class Eltwise:
    op = "eltwise"

    def __init__(self, spec: EltwiseSpec, target: AcceleratorTarget) -> None:
        self.spec, self.target = spec, target
        if target.acc_load_type(target.inp_dtype) is None:
            raise ScheduleError("this accelerator has no 8-bit accumulator load for int8 operands")
        if spec.batch % target.batch:
            raise ScheduleError(f"batch {spec.batch} is not a multiple of the core's batch {target.batch}")
        self.nb, self.cb = spec.batch // target.batch, -(-spec.channels // target.block_out)
        self.operands = ("a", "b") if spec.kind == "add" else ("a",)

    def tensors(self) -> dict[str, Tensor]:
        s, t = self.spec, self.target
        shape = (self.nb, self.cb, s.height, s.width, t.batch, t.block_out)
        ins = {n: placeholder(shape, t.inp_dtype, n) for n in self.operands}
        acc, (lo, hi) = t.acc_dtype, s.clip
        vec = {v: placeholder((self.cb, t.batch, t.block_out), acc, v) for v in s.vectors}

        def mult(name: str, c: E.Expr, bi: E.Expr, oi: E.Expr) -> E.Expr | int:
            return vec[name][c, bi, oi] if name in vec else int(getattr(s, name))

        b_term = None
        if "b" in ins:  # b times a multiplier is its own ALU stage: the ALU adds loaded tensors
            b_term = ins["b"] if s.mult_b == 1 else compute(
                shape, lambda n, c, y, x, bi, oi: E.cast(acc, ins["b"][n, c, y, x, bi, oi]) * mult(
                    "mult_b", c, bi, oi), "b_scaled")

        def body(n, c, y, x, bi, oi):  # type: ignore[no-untyped-def]
            v = E.cast(acc, ins["a"][n, c, y, x, bi, oi])
            if s.mult_a != 1:
                v = v * mult("mult_a", c, bi, oi)
            if b_term is not None:
                v = v + E.cast(acc, b_term[n, c, y, x, bi, oi])
            if s.shift:
                v = _round_shift(v, s.shift)
            return E.minimum(E.maximum(v, lo), hi)

        res = compute(shape, body, "res")
        out = compute(shape, lambda n, c, y, x, bi, oi: E.cast(t.out_dtype, res[n, c, y, x, bi, oi]), "out")
        return {**ins, **vec, "out": out}

    def space(self) -> dict[str, list[int]]:
        return {"tile_h": divisors(self.spec.height), "threads": [1, 2, 4]}

    def points(self) -> list[EltwiseKnobs]:
        return grid(EltwiseKnobs, self.space())  # type: ignore[no-any-return]

    def fits(self, k: EltwiseKnobs) -> bool:
        rows = self.spec.height // k.tile_h
        need = k.threads * len(self.operands) * k.tile_h * self.spec.width + self.cb * len(self.spec.vectors)
        return (rows % k.threads == 0 and need <= self.target.scope("acc").depth
                and k.threads <= self.target.token_capacity)

    def estimate(self, k: EltwiseKnobs) -> float | None:
        if not self.fits(k):
            return None
        cfg = self.target.cfg
        tiles = self.nb * self.cb * (self.spec.height // k.tile_h)
        elems = k.tile_h * self.spec.width
        load = len(self.operands) * (elems * cfg.out_elem_bytes / cfg.bus_bytes + cfg.dram_latency_cycles)
        return tiles * (load + elems * (len(self.operands) + 1)) / min(k.threads, 2)

    def default_knobs(self, vthreads: int | None = None) -> EltwiseKnobs:
        return default_point(self.points(), self.estimate, vthreads)  # type: ignore[no-any-return]

    def schedule(self, k: EltwiseKnobs) -> Schedule:
        check_knobs(k, self.space(), "eltwise")
        s = Schedule(self.tensors()["out"])
        s.set_scope("res", "acc")
        s.split("out", "y", k.tile_h)
        s.virtual_thread("out", "y.o", k.threads)
        s.reorder("out", "y.o.vt", "n", "c", "y.o.vi")
        scaled = "b_scaled" in s.stages
        for name in self.operands:
            load_into_acc(s, name, "res", ("out", "y.o.vi"), "b_scaled" if name == "b" and scaled else None)
        for v in self.spec.vectors:
            load_vector(s, v, "b_scaled" if v == "mult_b" else "res")
        s.compute_at("res", "out", "y.o.vi")
        s.pragma("res", "n", "alu")
        s.pragma("out", "y.i", "dma_copy")
        return s

    def random_inputs(self, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        shape = self.tensors()["out"].shape
        ins = {n: rng.integers(-128, 128, shape).astype(np.int8) for n in self.operands}
        return {**ins, **self.constants()}

    def constants(self) -> dict[str, np.ndarray]:
        """The multiplier vectors (see EltwiseSpec), packed (C/co, batch, co) int32."""
        t = self.target
        return {v: np.full((self.cb, t.batch, t.block_out), getattr(self.spec, v), t.acc_dtype)
                for v in self.spec.vectors}

    def reference(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        s = self.spec
        v = wrap32(inputs["a"].astype(np.int64) * s.mult_a)
        if "b" in inputs:
            v = wrap32(v + wrap32(inputs["b"].astype(np.int64) * s.mult_b))
        if s.shift:
            v = wrap32(v + (1 << (s.shift - 1))) >> s.shift
        return np.clip(v, *s.clip).astype(np.int8)  # type: ignore[no-any-return]

    def describe(self) -> dict[str, Any]:
        return {"op": self.spec.kind, **{k: v for k, v in asdict(self.spec).items() if k != "kind"}}


def _round_shift(v: E.Expr, shift: int) -> E.Expr:
    """(v + 2**(shift-1)) >> shift with every immediate inside the ALU's 16 bits: for a larger
    shift, ((v >> (shift - 15)) + 2**14) >> 15, which is the same integer (floor((n + f) / 2**k) =
    floor(n / 2**k) for an integer n and 0 <= f < 1).  Exact here because int8 operands times
    16-bit multipliers stay far from the 32-bit wrap that the one-step form could hit."""
    if 1 << (shift - 1) <= IMM_MAX:
        return (v + (1 << (shift - 1))) >> shift
    pre = shift - 15
    return ((v >> pre) + (1 << 14)) >> 15
