"""ALU ops of `sim.replay`: an independent ALU step on lattices of acc with a native ufunc
(`sim.alu.AluStep`), as one in-place numpy call.

Three passes make those calls cheaper, each giving the step's result bit for bit:
- an immediate over accumulators that fill a contiguous block runs on the block (the same
  operation on each element, in any order);
- a MAX then a MIN of immediates on the same accumulators is one op, and an immediate is an
  array of the destination's layout filled with it (shared by the ops of a Replay);
- a broadcast operand (a per-channel scale or bias read by every pixel) is copied into the
  destination's layout once and reused while no op writes its accumulators: numpy's loops are
  several times faster on two operands of one layout than on one with a stride of 0.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from hw import isa
from sim.alu import AluStep
from sim.replay_ops import ACC, Op, Write
from sim.scratchpads import Scratchpads

_Key = tuple[Any, ...]


class AluOp(Op):
    """One `AluStep` (independent, on lattices, native) and what the passes decided for it."""

    def __init__(self, step: AluStep) -> None:
        self.step = step
        assert step.d_lattice is not None
        self.lo, self.hi = step.d_lattice.span()
        self.block = step.use_imm and self.hi - self.lo == step.d.size  # lattice: distinct elements
        s = step.s_lattice
        self.span = (self.lo, self.hi) if s is None else \
            (min(self.lo, s.first), max(self.hi, s.span()[1]))
        self.clip_hi: np.integer | None = None  # a MIN of this immediate follows (fuse_clips)
        self.key: _Key | None = None  # the broadcast operand's buffer (hoist_operands)
        self.refresh = True  # copy the operand into that buffer first

    def writes(self) -> list[Write]:
        return [(ACC, self.lo, self.hi)] if self.step.d.size else []

    @functools.cached_property
    def acc_span(self) -> tuple[int, int] | None:
        return self.span

    def acc_touched(self) -> np.ndarray | None:
        step = self.step
        return step.d if step.use_imm else np.concatenate([step.d, step.s])

    def acc_written(self) -> np.ndarray | None:
        return self.step.d

    def bind(self, spads: Scratchpads, memo: dict[Any, Any]) -> Any:
        step, acc = self.step, spads.acc
        assert step.d_lattice is not None and step.native is not None
        if step.use_imm:
            dst = acc[self.lo : self.hi] if self.block else step.d_lattice.view(acc)
            low = _filled(memo, dst, step.native_imm)
            if self.clip_hi is not None:
                return _Clip(dst, low, _filled(memo, dst, self.clip_hi))
            return _Ufunc(step.native, dst, low)
        assert step.s_lattice is not None
        dst, src = step.d_lattice.view(acc), step.s_lattice.view(acc)
        if self.key is None:
            return _Ufunc(step.native, dst, src)
        if self.key not in memo:
            memo[self.key] = np.empty_like(dst)  # dst's layout: the key holds its shape and steps
        return _Broadcast(step.native, dst, src, memo[self.key], self.refresh)


class _Ufunc:
    __slots__ = ("dst", "operand", "ufunc")

    def __init__(self, ufunc: np.ufunc, dst: np.ndarray, operand: Any) -> None:
        self.ufunc, self.dst, self.operand = ufunc, dst, operand

    def __call__(self, dram: np.ndarray) -> None:  # numpy copies an operand overlapping dst first
        self.ufunc(self.dst, self.operand, out=self.dst)


def _filled(memo: dict[Any, Any], dst: np.ndarray, value: Any) -> np.ndarray:
    """An array of `value` in `dst`'s shape and layout: numpy's integer loops are several times
    faster on two arrays of one layout than with a scalar.  Shared by the ops of a Replay: one
    flat array per value for contiguous destinations, one per layout for the others."""
    if dst.flags.c_contiguous:
        key: tuple[Any, ...] = ("filled", value.dtype.str, int(value))
        if key not in memo or memo[key].size < dst.size:  # views taken keep a smaller one
            memo[key] = np.full(dst.size, value, dst.dtype)
        return memo[key][: dst.size].reshape(dst.shape)  # type: ignore[no-any-return]
    key = ("filled", value.dtype.str, int(value), dst.shape, dst.strides)
    if key not in memo:
        memo[key] = np.empty_like(dst)
        memo[key].fill(value)
    return memo[key]  # type: ignore[no-any-return]


class _Clip:
    """min(max(dst, lo), hi): two passes on arrays of one layout beat np.clip (a Python wrapper)."""

    __slots__ = ("dst", "hi", "lo")

    def __init__(self, dst: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        self.dst, self.lo, self.hi = dst, lo, hi

    def __call__(self, dram: np.ndarray) -> None:
        np.maximum(self.dst, self.lo, out=self.dst)
        np.minimum(self.dst, self.hi, out=self.dst)


class _Broadcast:
    __slots__ = ("buffer", "dst", "refresh", "src", "ufunc")

    def __init__(self, ufunc: np.ufunc, dst: np.ndarray, src: np.ndarray, buffer: np.ndarray,
                 refresh: bool) -> None:
        self.ufunc, self.dst, self.src, self.buffer, self.refresh = ufunc, dst, src, buffer, refresh

    def __call__(self, dram: np.ndarray) -> None:
        if self.refresh:
            np.copyto(self.buffer, self.src)
        self.ufunc(self.dst, self.buffer, out=self.dst)


def fuse_clips(ops: list[Op]) -> list[Op]:
    """Each MAX of an immediate followed by a MIN of an immediate on the same accumulators as
    one op."""
    out: list[Op] = []
    for op in ops:
        last = out[-1] if out else None
        if isinstance(op, AluOp) and isinstance(last, AluOp) and last.clip_hi is None and \
                last.step.use_imm and op.step.use_imm and last.step.op == isa.AluOp.MAX and \
                op.step.op == isa.AluOp.MIN and np.array_equal(last.step.d, op.step.d):
            last.clip_hi = op.step.native_imm
            continue
        out.append(op)
    return out


def hoist_operands(ops: list[Op], acc_depth: int) -> list[Op]:
    """Give each ALU op with a broadcast operand a buffer key; it copies the operand in
    (`refresh`) only where the buffer does not hold the operand's current values.  A key no op
    reuses is dropped (a copy and a fast op cost what the broadcast op costs)."""
    _track(ops, acc_depth)
    reused = {op.key for op in ops if isinstance(op, AluOp) and op.key is not None and not op.refresh}
    for op in ops:
        if isinstance(op, AluOp) and op.key not in reused:
            op.key, op.refresh = None, True
    return ops


def _track(ops: list[Op], acc_depth: int) -> None:
    held: dict[_Key, tuple[int, int, np.ndarray]] = {}  # key: the operand's range and elements
    for op in ops:
        if isinstance(op, AluOp):
            _assign_key(op, held, acc_depth)
        if not held:
            continue
        span = op.acc_range
        if span is None:
            held.clear()
            continue
        lo, hi = span
        for key, (s_lo, s_hi, mask) in list(held.items()):
            if lo < s_hi and s_lo < hi:
                written = op.acc_written()
                if written is None or bool(mask[written].any()):
                    del held[key]


def _assign_key(op: AluOp, held: dict[_Key, tuple[int, int, np.ndarray]], acc_depth: int) -> None:
    step = op.step
    s, d = step.s_lattice, step.d_lattice
    if step.use_imm or s is None or d is None or \
            not any(k == 0 and n > 1 for k, n in zip(s.steps, s.shape, strict=True)):
        return
    op.key = (s.first, s.shape, s.steps, d.shape, d.steps)
    op.refresh = op.key not in held
    if op.refresh:
        mask = np.zeros(acc_depth, bool)
        mask[step.s] = True
        held[op.key] = (s.first, s.span()[1], mask)
