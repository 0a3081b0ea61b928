"""The replay of a recorded fsim run: a post-recording pass over its steps, then a loop of a few
numpy calls per step on SRAM kept between runs.

`sim.fsim._Trace` records a validated Program's deterministic run as steps (`_LoadMove`,
`_StoreMove`, `GemmStep`, `AluStep`).  `Replay` compiles them once into ops
(`sim.replay_ops`) that do what the steps do with everything that depends only on the Program
decided in advance, and fuses what can be fused:

- consecutive LOADs (in any order of buffers: they read DRAM only and write different SRAMs) of
  one geometry into consecutive SRAM windows from DRAM windows a fixed distance apart: one copy;
  the same for STOREs whose DRAM windows are disjoint;
- a GEMM reset whose accumulators are next touched by one GEMM that writes exactly them: that
  GEMM assigns its products instead of adding them, and the reset goes;
- the products of one GEMM of equal shape: one batched matrix product;
- ALU steps as in `sim.replay_alu` (a MAX and MIN pair as one op, broadcast operands reused).

The ops run on one `Scratchpads` per Replay, bound once (views onto its SRAM are made once, not
per run; fsim's recording machine hands over its own, `Replay.adopt`), and zeroed where the ops
write before each run but the first (bound SRAM is all zero), so a replay starts from the state
a fresh run starts from.  Only acc and the float mirrors of inp and wgt are kept: a GEMM reads the
mirrors, nothing in a replay reads inp or wgt themselves.  A Replay pickles without its bound
state and without any reference to a DRAM array; a run that finds it running in another thread
binds SRAM of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from sim.alu import AluStep
from sim.gemm import GemmStep
from sim.replay_alu import AluOp, fuse_clips, hoist_operands
from sim.replay_ops import LoadOp, Op, ProductOp, ResetOp, StepOp, StoreOp
from sim.scratchpads import Scratchpads, _LoadMove, _StoreMove

_Bound = tuple[Scratchpads, list[np.ndarray], list[Any]]  # SRAM, what to zero, the ops' calls
_RESET_LOOKAHEAD = 64  # ops a reset is carried past to the GEMM that first writes its accumulators
_EMPTY = np.zeros(0, np.uint8)  # the DRAM a bound Scratchpads holds between runs
_EMPTY.flags.writeable = False


class Replay:
    """The compiled steps of one recorded run (see the module docstring)."""

    def __init__(self, cfg: AcceleratorConfig, steps: Sequence[Any]) -> None:
        self.cfg = cfg
        ops = fuse_resets(fuse_moves([op_of(cfg, step) for step in steps]), cfg.acc_depth)
        self.ops = hoist_operands(fuse_clips(ops), cfg.acc_depth)
        self._bound: _Bound | None = None
        self._zero = False  # the bound SRAM is all zero (bound, not yet run): nothing to clear
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_bound", "_zero", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _bound=None, _zero=False, _lock=threading.Lock())

    def adopt(self, spads: Scratchpads) -> None:
        """Bind the ops to `spads` instead of SRAM of their own, where none is bound yet: the
        Scratchpads of a machine that recorded without running anything but LOAD UOPs, whose
        other SRAM is zero as fresh SRAM is (the micro-ops, no op reads)."""
        with self._lock:
            if self._bound is None:
                spads.dram, spads.on_uop_load = _EMPTY, _ignore
                spads.sram[isa.MemType.UOP].fill(0)  # all zero, as fresh SRAM (a small buffer)
                self._bound, self._zero = self._bind(spads), True

    def bind(self) -> None:
        """Bind the ops to SRAM of their own now, where none is bound yet (else the first run
        does it)."""
        with self._lock:
            if self._bound is None:
                self._bound, self._zero = self._bind(), True

    def run(self, dram: np.ndarray) -> None:
        """Execute the ops against `dram`, updated in place."""
        if not self._lock.acquire(blocking=False):  # running in another thread: SRAM of its own
            self._run(self._bind(), dram, True)
            return
        try:
            if self._bound is None:
                self._bound, self._zero = self._bind(), True
            zero, self._zero = self._zero, False
            self._run(self._bound, dram, zero)
        finally:
            self._lock.release()

    @staticmethod
    def _run(bound: _Bound, dram: np.ndarray, zero_already: bool) -> None:
        """Clear what the ops write (unless the SRAM is all zero already, freshly bound), then
        run them."""
        spads, zero, calls = bound
        spads.dram = dram  # for steps that run as recorded (`replay_ops.StepOp`)
        try:
            if not zero_already:
                for view in zero:
                    view.fill(0)
            for call in calls:
                call(dram)
        finally:
            spads.dram = _EMPTY

    def _bind(self, spads: Scratchpads | None = None) -> _Bound:
        if spads is None:  # zero pages: what the ops never touch takes no memory
            spads = Scratchpads(self.cfg, _EMPTY)
        buffers = {isa.MemType.ACC: spads.acc, **spads.mirror}
        zero: list[np.ndarray] = []
        for m, (lo, hi) in envelopes(self.ops).items():
            if m is None:  # a step that runs as recorded may write any SRAM: zero them all
                zero.extend([*spads.sram.values(), *spads.mirror.values()])
            elif hi > lo:
                zero.append(buffers[m][lo:hi])
        memo: dict[Any, Any] = {}
        return spads, zero, [op.bind(spads, memo) for op in self.ops]


def _ignore() -> None:
    """A bound Scratchpads' `on_uop_load` (no op loads micro-ops)."""


def op_of(cfg: AcceleratorConfig, step: Any) -> Op:
    """The op of one recorded step (a GEMM step's product groups are the step's own: a step is
    recorded once per instruction shape and micro-op table, and run often)."""
    if isinstance(step, _LoadMove):
        return LoadOp(cfg, step.insn)
    if isinstance(step, _StoreMove):
        return StoreOp(cfg, step.insn)
    if isinstance(step, AluStep) and step.d_lattice is not None and step.native is not None and \
            (step.use_imm or step.s_lattice is not None):
        return AluOp(step)
    if isinstance(step, GemmStep):
        plan = step.plan
        if plan.reset_dst is not None:
            return ResetOp(plan.reset_dst, plan.reset_lattice)
        if plan.general is None:
            return ProductOp(cfg, step.product_groups())
    return StepOp(step)


def envelopes(ops: Sequence[Op]) -> dict[isa.MemType | None, tuple[int, int]]:
    """Per buffer, the [lo, hi) element range the ops write (None: some op may write anything)."""
    out: dict[isa.MemType | None, tuple[int, int]] = {}
    for op in ops:
        for m, lo, hi in op.writes():
            old = out.get(m, (lo, hi))
            out[m] = (min(old[0], lo), max(old[1], hi))
    return out


def fuse_moves(ops: list[Op]) -> list[Op]:
    """Runs of consecutive LOADs sorted by buffer (stable), then each op merged into the one
    before it where they fuse (`Op.merge`)."""
    ordered: list[Op] = []
    run: list[Op] = []
    for op in [*ops, None]:
        if op is not None and op.is_load:
            run.append(op)
            continue
        ordered.extend(sorted(run, key=lambda o: o.buffer_rank))
        run = []
        if op is not None:
            ordered.append(op)
    out: list[Op] = []
    for op in ordered:
        if not (out and out[-1].merge(op)):
            out.append(op)
    return [piece for op in out for piece in op.finish()]


def fuse_resets(ops: list[Op], acc_depth: int) -> list[Op]:
    """Drop each reset whose accumulators the next op touching them overwrites whole: a GEMM
    writing exactly them, which then assigns instead of adding."""
    out: list[Op] = []
    for index, op in enumerate(ops):
        if not (isinstance(op, ResetOp) and _assign_after(op, ops[index + 1 :], acc_depth)):
            out.append(op)
    return out


def _assign_after(reset: ResetOp, later: Sequence[Op], acc_depth: int) -> bool:
    lo, hi = reset.span
    zeroed: np.ndarray | None = None
    for op in later[:_RESET_LOOKAHEAD]:
        span = op.acc_span
        if span is not None and (span[1] <= lo or hi <= span[0] or span[0] == span[1]):
            continue  # nowhere near the reset's accumulators
        if zeroed is None:
            zeroed = np.zeros(acc_depth, bool)
            zeroed[reset.dst] = True
            count = int(np.count_nonzero(zeroed))
        touched = op.acc_touched()
        if touched is None:
            return False
        if not touched.size or not zeroed[touched].any():
            continue
        if isinstance(op, ProductOp) and not op.assign and op.written_size() == count and \
                bool(zeroed[touched].all()):
            op.assign = True  # written elements are distinct: `count` of them, all zeroed here
            return True
        return False
    return False


