"""`Schedule`: stages of a tensor-expression graph plus the records applied to them.

Applying a record updates the stages' state at once, so an illegal record raises ScheduleError
naming itself; `Schedule.replay(outputs, records)` rebuilds the same state from the same records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.errors import ScheduleError
from compiler.schedule import records as R
from compiler.te.expr import Expr, Load, Reduce, Var, loads, rebuild
from compiler.te.tensor import ComputeOp, IterVar, Tensor


@dataclass
class Relation:
    """How leaf axes derive from a parent axis: split (outer*factor + inner) or fuse."""

    kind: str  # "split" | "fuse"
    parent: str  # split: the axis split; fuse: the fused axis
    outer: str
    inner: str
    factor: int = 0  # split: the inner extent; fuse: unused (taken from the inner extent)


@dataclass
class Stage:
    name: str
    tensor: Tensor
    body: Expr
    axes: tuple[IterVar, ...]
    scope: str = "global"
    leaves: list[str] = field(default_factory=list)
    reduce_names: set[str] = field(default_factory=set)
    relations: list[Relation] = field(default_factory=list)
    attach: tuple[str, str] | None = None  # (parent stage, axis), None = root
    inline: bool = False
    pragmas: dict[str, str] = field(default_factory=dict)
    tensorize: tuple[str, str] | None = None  # (axis, intrinsic)
    vthreads: set[str] = field(default_factory=set)
    loop_kinds: dict[str, str] = field(default_factory=dict)  # axis -> "vectorize", GPU: a thread
    # tag (records.THREAD_TAGS) or "unroll"

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    def check_leaf(self, record: R.Record, axis: str) -> None:
        if axis not in self.leaves:
            raise ScheduleError(
                f"{R.describe(record)}: stage {self.name} has no loop axis {axis!r}; "
                f"its axes are {', '.join(self.leaves)}"
            )


class Schedule:
    """The stages computing `outputs` and the ordered records applied to them."""

    def __init__(self, outputs: Tensor | list[Tensor]) -> None:
        self.outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        self.records: list[R.Record] = []
        self.stages: dict[str, Stage] = {}
        self.inputs: dict[str, Tensor] = {}
        for t in _topological(self.outputs):
            self._add_tensor(t)

    # -- graph --------------------------------------------------------------------------------
    def _add_tensor(self, t: Tensor) -> None:
        if t.name in self.stages or t.name in self.inputs:
            raise ScheduleError(f"two tensors are named {t.name!r}; tensor names must be unique")
        if t.op is None:
            self.inputs[t.name] = t
            return
        self._add_stage(t)

    def _add_stage(self, t: Tensor, body: Expr | None = None) -> Stage:
        assert t.op is not None
        stage = Stage(t.name, t, t.op.body if body is None else body, t.op.axes)
        stage.leaves = [a.name for a in t.op.axes] + [a.name for a in stage.reduce_axes]
        stage.reduce_names = {a.name for a in stage.reduce_axes}
        if len(set(stage.leaves)) != len(stage.leaves):
            raise ScheduleError(f"stage {t.name}: axis names repeat: {stage.leaves}")
        self.stages[t.name] = stage
        return stage

    def stage(self, name: str | Tensor) -> Stage:
        key = name.name if isinstance(name, Tensor) else name
        if key not in self.stages:
            raise ScheduleError(f"no stage {key!r}; stages are {', '.join(self.stages)}")
        return self.stages[key]

    def tensor(self, name: str) -> Tensor:
        if name in self.stages:
            return self.stages[name].tensor
        if name in self.inputs:
            return self.inputs[name]
        raise ScheduleError(f"no tensor {name!r}")

    def readers(self, name: str) -> list[str]:
        return [s.name for s in self.stages.values()
                if any(ld.tensor.name == name for ld in loads(s.body))]

    def is_output(self, name: str) -> bool:
        return any(t.name == name for t in self.outputs)

    # -- the primitives ---------------------------------------------------------------------------
    def apply(self, record: R.Record) -> None:
        handler = getattr(self, f"_apply_{record.kind}")
        handler(record)
        self.records.append(record)

    def split(self, stage: str, axis: str, factor: int) -> tuple[str, str]:
        rec = R.Split(stage, axis, factor)
        self.apply(rec)
        return rec.outer, rec.inner

    def reorder(self, stage: str, *axes: str) -> None:
        self.apply(R.Reorder(stage, tuple(axes)))

    def fuse(self, stage: str, outer: str, inner: str) -> str:
        rec = R.Fuse(stage, outer, inner)
        self.apply(rec)
        return rec.fused

    def compute_at(self, stage: str, parent: str, axis: str) -> None:
        self.apply(R.ComputeAt(stage, parent, axis))

    def compute_inline(self, stage: str) -> None:
        self.apply(R.ComputeInline(stage))

    def cache_read(self, tensor: str, scope: str, readers: list[str] | tuple[str, ...]) -> str:
        rec = R.CacheRead(tensor, scope, tuple(readers))
        self.apply(rec)
        return rec.name

    def cache_write(self, stage: str, scope: str) -> str:
        rec = R.CacheWrite(stage, scope)
        self.apply(rec)
        return rec.name

    def set_scope(self, stage: str, scope: str) -> None:
        self.apply(R.SetScope(stage, scope))

    def tensorize(self, stage: str, axis: str, intrinsic: str = "gemm") -> None:
        self.apply(R.Tensorize(stage, axis, intrinsic))

    def virtual_thread(self, stage: str, axis: str, count: int) -> tuple[str, str]:
        rec = R.VirtualThread(stage, axis, count)
        self.apply(rec)
        return rec.outer, rec.inner

    def pragma(self, stage: str, axis: str, pragma: str) -> None:
        self.apply(R.Pragma(stage, axis, pragma))

    def vectorize(self, stage: str, axis: str) -> None:
        self.apply(R.Vectorize(stage, axis))

    def bind(self, stage: str, axis: str, thread: str) -> None:
        self.apply(R.Bind(stage, axis, thread))

    def unroll(self, stage: str, axis: str) -> None:
        self.apply(R.Unroll(stage, axis))

    # -- record handlers ----------------------------------------------------------------------------
    def _apply_split(self, rec: R.Split) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        if isinstance(rec.factor, bool) or not isinstance(rec.factor, int) or rec.factor < 1:
            raise ScheduleError(f"{R.describe(rec)}: factor must be a positive int")
        _split_leaf(st, rec.axis, rec.outer, rec.inner, rec.factor, "split")

    def _apply_virtual_thread(self, rec: R.VirtualThread) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        if isinstance(rec.count, bool) or not isinstance(rec.count, int) or rec.count < 1:
            raise ScheduleError(f"{R.describe(rec)}: the thread count must be a positive int")
        if rec.axis in st.reduce_names:
            raise ScheduleError(f"{R.describe(rec)}: virtual threads cannot split a reduction axis "
                                "(the threads would write the same accumulators)")
        _split_leaf(st, rec.axis, rec.outer, rec.inner, rec.count, "nparts")
        st.vthreads.add(rec.outer)

    def _apply_reorder(self, rec: R.Reorder) -> None:
        st = self.stage(rec.stage)
        for a in rec.axes:
            st.check_leaf(rec, a)
        if len(set(rec.axes)) != len(rec.axes):
            raise ScheduleError(f"{R.describe(rec)}: an axis is named twice")
        slots = sorted(st.leaves.index(a) for a in rec.axes)
        for slot, a in zip(slots, rec.axes, strict=True):
            st.leaves[slot] = a

    def _apply_fuse(self, rec: R.Fuse) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.outer)
        st.check_leaf(rec, rec.inner)
        i = st.leaves.index(rec.outer)
        if i + 1 >= len(st.leaves) or st.leaves[i + 1] != rec.inner:
            raise ScheduleError(f"{R.describe(rec)}: {rec.inner} must directly follow {rec.outer}")
        if (rec.outer in st.reduce_names) != (rec.inner in st.reduce_names):
            raise ScheduleError(f"{R.describe(rec)}: cannot fuse a reduction and a spatial axis")
        st.relations.append(Relation("fuse", rec.fused, rec.outer, rec.inner))
        st.leaves[i : i + 2] = [rec.fused]
        if rec.outer in st.reduce_names:
            st.reduce_names.add(rec.fused)

    def _apply_compute_at(self, rec: R.ComputeAt) -> None:
        st, parent = self.stage(rec.stage), self.stage(rec.parent)
        parent.check_leaf(rec, rec.axis)
        if self.is_output(st.name):
            raise ScheduleError(f"{R.describe(rec)}: an output stage is computed at the root")
        if st.inline:
            raise ScheduleError(f"{R.describe(rec)}: stage {st.name} was inlined")
        chain = [rec.parent]
        while self.stages[chain[-1]].attach is not None:
            chain.append(self.stages[chain[-1]].attach[0])  # type: ignore[index]
        if st.name in chain:
            raise ScheduleError(f"{R.describe(rec)}: {st.name} would be computed inside itself")
        st.attach = (rec.parent, rec.axis)

    def _apply_compute_inline(self, rec: R.ComputeInline) -> None:
        st = self.stage(rec.stage)
        if isinstance(st.body, Reduce):
            raise ScheduleError(f"{R.describe(rec)}: a reduction cannot be inlined")
        if self.is_output(st.name):
            raise ScheduleError(f"{R.describe(rec)}: an output stage cannot be inlined")
        st.inline = True

    def _apply_set_scope(self, rec: R.SetScope) -> None:
        st = self.stage(rec.stage)
        _check_scope(rec, rec.scope)
        if self.is_output(st.name) and rec.scope != "global":
            raise ScheduleError(f"{R.describe(rec)}: an output must stay in DRAM (global)")
        st.scope = rec.scope

    def _apply_cache_read(self, rec: R.CacheRead) -> None:
        _check_scope(rec, rec.scope)
        src = self.tensor(rec.tensor)
        readers = self.readers(rec.tensor)
        for r in rec.readers:
            if r not in readers:
                raise ScheduleError(f"{R.describe(rec)}: {r} does not read {rec.tensor} "
                                    f"(its readers: {', '.join(readers) or 'none'})")
        if not rec.readers:
            raise ScheduleError(f"{R.describe(rec)}: name at least one reader")
        names = [a.name for a in src.op.axes] if src.op else [f"i{k}" for k in range(src.ndim)]
        axes = tuple(IterVar(Var(n), e) for n, e in zip(names, src.shape, strict=True))
        copy = Tensor(rec.name, src.shape, src.dtype,
                      ComputeOp(axes, src[tuple(a.var for a in axes)]))
        self._insert_copy(rec, copy)
        for r in rec.readers:
            st = self.stages[r]
            st.body = _redirect(st.body, src, copy)
        self.stages[rec.name].scope = rec.scope

    def _apply_cache_write(self, rec: R.CacheWrite) -> None:
        _check_scope(rec, rec.scope)
        st = self.stage(rec.stage)
        if st.relations or st.attach or st.pragmas or st.tensorize:
            raise ScheduleError(f"{R.describe(rec)}: apply cache_write before other records on "
                                f"{st.name}")
        op = ComputeOp(st.axes, st.body)
        cache = Tensor(rec.name, st.tensor.shape, st.tensor.dtype, op)
        self._insert_copy(rec, cache)
        self.stages[rec.name].scope = rec.scope
        st.body = cache[tuple(a.var for a in st.axes)]
        st.leaves = [a.name for a in st.axes]
        st.reduce_names = set()

    def _insert_copy(self, rec: R.Record, t: Tensor) -> None:
        if t.name in self.stages or t.name in self.inputs:
            raise ScheduleError(f"{R.describe(rec)}: a stage named {t.name} already exists")
        self._add_stage(t)

    def _apply_tensorize(self, rec: R.Tensorize) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        st.tensorize = (rec.axis, rec.intrinsic)

    def _apply_pragma(self, rec: R.Pragma) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        if rec.pragma not in R.PRAGMAS:
            raise ScheduleError(f"{R.describe(rec)}: unknown pragma {rec.pragma!r}; known: "
                                f"{', '.join(R.PRAGMAS)}")
        st.pragmas[rec.axis] = rec.pragma

    def _apply_vectorize(self, rec: R.Vectorize) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        st.loop_kinds[rec.axis] = "vectorize"

    def _apply_bind(self, rec: R.Bind) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        if rec.thread not in R.THREAD_TAGS:
            raise ScheduleError(f"{R.describe(rec)}: unknown thread {rec.thread!r}; known: "
                                f"{', '.join(R.THREAD_TAGS)}")
        if rec.axis in st.reduce_names:
            raise ScheduleError(f"{R.describe(rec)}: a reduction axis cannot be bound to threads "
                                "(they would add into the same output without synchronising)")
        if rec.thread in st.loop_kinds.values():
            raise ScheduleError(f"{R.describe(rec)}: stage {st.name} binds {rec.thread} already")
        if rec.axis in st.loop_kinds:
            raise ScheduleError(f"{R.describe(rec)}: {rec.axis} is marked "
                                f"{st.loop_kinds[rec.axis]} already")
        st.loop_kinds[rec.axis] = rec.thread

    def _apply_unroll(self, rec: R.Unroll) -> None:
        st = self.stage(rec.stage)
        st.check_leaf(rec, rec.axis)
        if rec.axis in st.loop_kinds:
            raise ScheduleError(f"{R.describe(rec)}: {rec.axis} is marked "
                                f"{st.loop_kinds[rec.axis]} already")
        st.loop_kinds[rec.axis] = "unroll"

    # -- persistence ------------------------------------------------------------------------------
    def to_json(self) -> list[dict[str, Any]]:
        return [R.to_json(r) for r in self.records]

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"records": self.to_json()}, indent=1) + "\n")

    @classmethod
    def replay(cls, outputs: Tensor | list[Tensor], records: list[R.Record]) -> Schedule:
        s = cls(outputs)
        for rec in records:
            s.apply(rec)
        return s

    def __str__(self) -> str:
        return "\n".join(R.describe(r) for r in self.records)


def read_schedule_file(path: str | Path) -> Any:
    """The JSON content of a schedule file; a missing or malformed file is a ScheduleError."""
    p = Path(path)
    if not p.is_file():
        raise ScheduleError(f"{path}: no such schedule file")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"{path}: not valid JSON ({exc})") from None


def load_records(path: str | Path) -> list[R.Record]:
    """The records of a schedule file written by `Schedule.save`."""
    data = read_schedule_file(path)
    items = data.get("records") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ScheduleError(f"{path}: expected an object with a list 'records'")
    return [R.from_json(item, f"{path} record {i}") for i, item in enumerate(items)]


def _check_scope(rec: R.Record, scope: str) -> None:
    if scope not in R.SCOPES:
        raise ScheduleError(f"{R.describe(rec)}: unknown scope {scope!r}; known: "
                            f"{', '.join(R.SCOPES)}")


def _split_leaf(st: Stage, axis: str, outer: str, inner: str, factor: int, mode: str) -> None:
    for name in (outer, inner):
        if name in st.leaves:
            raise ScheduleError(f"stage {st.name}: axis {name} exists already")
    i = st.leaves.index(axis)
    st.leaves[i : i + 1] = [outer, inner]
    st.relations.append(Relation(mode, axis, outer, inner, factor))
    if axis in st.reduce_names:
        st.reduce_names |= {outer, inner}


def _redirect(e: Expr, src: Tensor, dst: Tensor) -> Expr:
    if isinstance(e, Load) and e.tensor is src:
        return Load(dst, tuple(_redirect(i, src, dst) for i in e.indices))
    return rebuild(e, lambda c: _redirect(c, src, dst))


def _topological(outputs: list[Tensor]) -> list[Tensor]:
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for i in t.inputs():
            visit(i)
        order.append(t)

    for t in outputs:
        visit(t)
    return order
