"""`build`: schedule -> loop IR -> passes -> Program, keeping each stage's IR for inspection.

With the environment variable CODESIGN_VERIFY_IR set (to anything but "" or "0"; the test suite
sets it), the IR is checked by `compiler.tir.verify` after lowering and after every pass, and a
broken invariant raises IRError naming the pass; without it the pipeline does not walk the IR
for checking at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from compiler import passes
from compiler.codegen.accel.emit import emit
from compiler.lower.lower import LoweredFunc, lower
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget
from compiler.tir import stmt as S
from compiler.tir.printer import print_ir
from compiler.tir.verify import verify, verifying
from hw.program import Program

PIPELINE = (
    ("inject_dma", passes.inject_dma),
    ("tensorize", passes.tensorize),
    ("lower_alu", passes.lower_alu),
    ("fold_kernels", passes.fold_kernels),
)
# every pass after lowering, in order, as (name, fn(body, target))
PASSES: tuple[tuple[str, Callable[[S.Stmt, AcceleratorTarget], S.Stmt]], ...] = (
    *PIPELINE,
    ("insert_tokens", lambda body, target: passes.insert_tokens(body)),
    ("inject_virtual_threads", passes.inject_virtual_threads),
)


@dataclass
class Built:
    program: Program
    func: LoweredFunc
    ir: dict[str, S.Stmt] = field(default_factory=dict)  # after lowering and after each pass

    def print_ir(self, after: str = "inject_virtual_threads") -> str:
        return print_ir(self.ir[after])


def run_passes(func: LoweredFunc, target: AcceleratorTarget) -> dict[str, S.Stmt]:
    """The IR of `func` after lowering ("lower") and after each of PASSES, by stage name in
    pipeline order; raises ScheduleError as the passes do (and IRError, a bug, when verifying)."""
    check = verifying()
    body = func.body
    ir: dict[str, S.Stmt] = {"lower": body}
    if check:
        verify(body, "lower", func.buffers)
    for pass_name, fn in PASSES:
        body = fn(body, target)
        ir[pass_name] = body
        if check:
            verify(body, pass_name, func.buffers)
    return ir


def build(sched: Schedule, target: AcceleratorTarget, name: str = "main") -> Built:
    func = lower(sched, target, name)
    ir = run_passes(func, target)
    return Built(emit(func, ir["inject_virtual_threads"], target), func, ir)
