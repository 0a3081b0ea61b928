"""`build`: schedule -> loop IR -> passes -> Program, keeping each stage's IR for inspection."""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler import passes
from compiler.codegen.accel.emit import emit
from compiler.lower.lower import LoweredFunc, lower
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget
from compiler.tir import stmt as S
from compiler.tir.printer import print_ir
from hw.program import Program

PIPELINE = (
    ("inject_dma", passes.inject_dma),
    ("tensorize", passes.tensorize),
    ("lower_alu", passes.lower_alu),
    ("fold_kernels", passes.fold_kernels),
)


@dataclass
class Built:
    program: Program
    func: LoweredFunc
    ir: dict[str, S.Stmt] = field(default_factory=dict)  # after lowering and after each pass

    def print_ir(self, after: str = "inject_virtual_threads") -> str:
        return print_ir(self.ir[after])


def build(sched: Schedule, target: AcceleratorTarget, name: str = "main") -> Built:
    func = lower(sched, target, name)
    ir: dict[str, S.Stmt] = {"lower": func.body}
    body = func.body
    for pass_name, fn in PIPELINE:
        body = fn(body, target)  # type: ignore[operator]
        ir[pass_name] = body
    body = passes.insert_tokens(body)
    ir["insert_tokens"] = body
    body = passes.inject_virtual_threads(body, target)
    ir["inject_virtual_threads"] = body
    return Built(emit(func, body, target), func, ir)
