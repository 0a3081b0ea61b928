"""The instruction stream with VTA's runtime rules for dependency flags (VTA's src/runtime.cc).

A pop is pending until the next instruction of its module takes it as a flag; a push sets the
flag of the last instruction when that instruction belongs to the pushing module (after any
pending pops of that module are committed), otherwise it becomes a NOP that only pushes.
"""

from __future__ import annotations

from typing import Any

from hw import isa

_MODULE = {"load": isa.Module.LOAD, "compute": isa.Module.COMPUTE, "store": isa.Module.STORE}


class Stream:
    def __init__(self) -> None:
        self.insns: list[isa.Insn] = []
        self.pending: dict[isa.Module, set[str]] = {m: set() for m in isa.Module}
        # Instructions are immutable and repeat (emit reuses one object per operand values), so
        # a flagged copy is made once per (instruction, flags): (original kept alive, copy).
        self.flagged: dict[tuple[int, frozenset[str]], tuple[isa.Insn, isa.Insn]] = {}
        self.nops: dict[tuple[isa.Module, frozenset[str]], isa.Insn] = {}

    def add(self, insn: isa.Insn) -> None:
        module = isa.module_of(insn)
        flags = self.pending[module]
        if flags:
            insn = self.with_flags(insn, frozenset(flags))
            flags.clear()
        self.insns.append(insn)

    def pop(self, src: str, dst: str) -> None:
        s, d = _MODULE[src], _MODULE[dst]
        flag = "pop_prev" if s < d else "pop_next"
        if flag in self.pending[d]:
            self.commit(d)
        self.pending[d].add(flag)

    def push(self, src: str, dst: str) -> None:
        s, d = _MODULE[src], _MODULE[dst]
        if self.pending[s]:
            self.commit(s)
        flag = "push_next" if s < d else "push_prev"
        last = self.insns[-1] if self.insns else None
        if last is not None and isa.module_of(last) == s and not getattr(last, flag):
            self.insns[-1] = self.with_flags(last, frozenset((flag,)))
        else:
            self.insns.append(self.nop(s, frozenset((flag,))))

    def commit(self, module: isa.Module) -> None:
        flags = self.pending[module]
        self.insns.append(self.nop(module, frozenset(flags)))
        flags.clear()

    def with_flags(self, insn: isa.Insn, flags: frozenset[str]) -> isa.Insn:
        key = (id(insn), flags)
        found = self.flagged.get(key)
        if found is None:
            found = self.flagged[key] = (insn, isa.with_fields(insn, **dict.fromkeys(flags, True)))
        return found[1]

    def nop(self, module: isa.Module, flags: frozenset[str]) -> isa.Insn:
        found = self.nops.get((module, flags))
        if found is None:
            found = self.nops[module, flags] = nop(module, **dict.fromkeys(flags, True))
        return found

    def finish(self) -> None:
        """Drain load and store into compute, then FINISH (ordered after every transfer)."""
        self.push("store", "compute")
        self.push("load", "compute")
        self.pop("store", "compute")
        self.pop("load", "compute")
        self.add(isa.Finish())


def nop(module: isa.Module, **flags: Any) -> isa.Insn:
    if module == isa.Module.STORE:
        return isa.Store(x_size=0, y_size=0, x_stride=0, **flags)
    memory_type = isa.MemType.INP if module == isa.Module.LOAD else isa.MemType.UOP
    return isa.Load(memory_type=memory_type, x_size=0, y_size=0, x_stride=0, **flags)
