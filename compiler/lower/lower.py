"""Schedule -> loop IR: inlining, bound inference, scoped allocation and loop nests.

Each stage becomes a nest of its leaf loops; stages attached with compute_at are placed inside
their parent's loop and computed for the region it needs (bound inference: interval arithmetic
on affine indices, the loops above the attach point held symbolic).  Scoped stages get buffers
in their scratchpad (one copy per enclosing virtual thread); a capacity overflow is a
ScheduleError.  The result still holds generic `Store`s under pragma/tensorize marks: the passes
turn them into DMA, micro-ops and tokens.

`Lowering` is the part every target shares (inlining, bound inference, the nests); a target's
subclass places the stages that are not outputs (`allocate`) and may refuse a placement
(`check_placement`): `AccelLowering` here (scratchpads), compiler.lower.cpu's for the CPU
(temporaries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.errors import ScheduleError
from compiler.lower.bounds import Domain, LoopAxis, leaf_loops, region_of
from compiler.schedule.schedule import Schedule, Stage
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S


@dataclass
class LoweredFunc:
    name: str
    body: S.Stmt
    inputs: list[Tensor]
    outputs: list[Tensor]
    buffers: dict[str, S.Buffer] = field(default_factory=dict)
    # elements each scratchpad scope holds and what (`check_capacity`'s input), for re-checking
    # a compiled stream against another config's depths
    scratchpad: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass
class StageLoops:
    """One stage's loops: its domain (the region computed), leaf loops, axis variables in terms of
    them, and the loops enclosing it."""

    stage: Stage
    domain: list[Domain]
    leaves: list[LoopAxis]
    index: dict[E.Var, E.Expr]  # original axis variable -> expression over leaf variables
    outer: list[LoopAxis]  # loops enclosing the stage, outermost first


class Lowering:
    """Lowering of one schedule, for any target: `infer()`, then the subclass's `allocate()`,
    then `build()`.  A stage in `buffers` is stored there (indices relative to its region's
    origin); any other is stored in its own tensor."""

    def __init__(self, sched: Schedule) -> None:
        self.sched = sched
        self.live = [s for s in sched.stages.values() if not s.inline]
        self.order = _topological(sched, self.live)
        self.bodies = {s.name: _inline(sched, s.body) for s in self.live}
        self.children: dict[tuple[str, str], list[str]] = {}
        for s in self.order:
            if s.attach is not None:
                self.children.setdefault(s.attach, []).append(s.name)
        self.loops: dict[str, StageLoops] = {}
        self.buffers: dict[str, S.Buffer] = {}

    # -- bound inference ----------------------------------------------------------------------
    def infer(self) -> None:
        for st in reversed(self.order):
            outer = self._outer_of(st)
            domain = self._domain(st, outer)
            leaves, index = leaf_loops(st, domain)
            self.loops[st.name] = StageLoops(st, domain, leaves, index, outer)

    def _outer_of(self, st: Stage) -> list[LoopAxis]:
        if st.attach is None:
            return []
        parent_name, axis = st.attach
        if parent_name not in self.loops:
            raise ScheduleError(f"stage {st.name} is computed at {parent_name}, which is inlined "
                                "or does not consume it")
        parent = self.loops[parent_name]
        names = [lp.name for lp in parent.leaves]
        return parent.outer + parent.leaves[: names.index(axis) + 1]

    @staticmethod
    def _check_inside(st: Stage, outer: list[LoopAxis], reader: str, rl: StageLoops) -> None:
        """A stage is produced inside its attach loop: every reader must run inside it too, or
        it would read the stage before it is written (or after it is overwritten)."""
        around = [lp.var for lp in rl.outer + rl.leaves]
        if around[: len(outer)] != [lp.var for lp in outer]:
            assert st.attach is not None
            raise ScheduleError(f"stage {st.name} is computed at {st.attach[0]}.{st.attach[1]}, but "
                                f"{reader} reads it outside that loop; compute it at a loop that "
                                f"encloses every reader")

    def _domain(self, st: Stage, outer: list[LoopAxis]) -> list[Domain]:
        full = [Domain(Affine({}, 0), a.extent) for a in st.axes]
        if st.attach is None:
            return full
        symbolic = self.symbolic(st, outer)
        extents = {lp.var: lp.extent for sl in self.loops.values() for lp in sl.leaves}
        regions = []
        for reader in self.live:
            if reader.name not in self.loops:
                continue
            rl = self.loops[reader.name]
            for load in E.loads(self.bodies[reader.name]):
                if load.tensor is st.tensor:
                    self._check_inside(st, outer, reader.name, rl)
                    idx = [E.substitute(i, rl.index) for i in load.indices]
                    regions.append(region_of(st.name, reader.name, idx, symbolic, extents))
        # every attached stage has a reader (a stage nothing reads is not live), and every reader
        # runs inside the attach loop (_check_inside)
        assert regions, f"stage {st.name} has no reader"
        out = regions[0]
        for r in regions[1:]:
            out = [a.union(b, st.name) for a, b in zip(out, r, strict=True)]
        return out

    def symbolic(self, st: Stage, outer: list[LoopAxis]) -> set[E.Var]:
        """The loops around `st`'s attach point its region is computed per value of (all of them
        here; the GPU's shared stages range over the block's threads: compiler.lower.gpu)."""
        return {lp.var for lp in outer}

    def allocate(self) -> None:
        """Give the stages that are not outputs their buffers (per target)."""
        raise NotImplementedError

    # -- nests ---------------------------------------------------------------------------------
    def build(self) -> S.Stmt:
        roots = [s for s in self.order if s.attach is None]
        return S.seq(*(self._stage_stmt(s) for s in roots))

    def check_placement(self, st: Stage) -> None:
        """Refuse where stage `st` is stored, if the target cannot store it there (none refused)."""

    def _stage_stmt(self, st: Stage) -> S.Stmt:
        self.check_placement(st)
        sl = self.loops[st.name]
        body = self.bodies[st.name]
        target, idx = self._target(st, sl)
        value = self._rewrite(body.source if isinstance(body, E.Reduce) else body, sl)
        if isinstance(body, E.Reduce):
            update = S.Store(target, idx, E.combine(body.op, E.Load(target, idx), value))
        else:
            update = S.Store(target, idx, value)
        names = [lp.name for lp in sl.leaves]
        first_reduce = next((k for k, lp in enumerate(sl.leaves) if lp.reduce), None)
        tensorize_at = names.index(st.tensorize[0]) if st.tensorize else None
        init = None
        if isinstance(body, E.Reduce):
            init = self._init_nest(st, sl, target, idx, first_reduce or 0, tensorize_at)
        return self._nest(st, sl, 0, update, init, first_reduce, tensorize_at)

    def _nest(self, st: Stage, sl: StageLoops, k: int, update: S.Stmt, init: S.Stmt | None,
              first_reduce: int | None, tensorize_at: int | None) -> S.Stmt:
        if k == len(sl.leaves):
            return update
        lp = sl.leaves[k]
        inner = self._nest(st, sl, k + 1, update, init, first_reduce, tensorize_at)
        kids = [self._stage_stmt(self.sched.stages[c]) for c in self.children.get((st.name, lp.name), [])]
        loop: S.Stmt = S.For(lp.var, lp.extent, S.seq(*kids, inner), lp.kind)
        if lp.name in st.pragmas:
            loop = S.Attr("pragma", st.pragmas[lp.name], st.name, loop)
        if tensorize_at == k:
            loop = S.Attr("tensorize", st.tensorize[1], st.name, loop)  # type: ignore[index]
        if init is not None and k == first_reduce:
            loop = S.seq(init, loop)
        return loop

    def _init_nest(self, st: Stage, sl: StageLoops, target: Tensor, idx: tuple[E.Expr, ...],
                   first_reduce: int, tensorize_at: int | None) -> S.Stmt:
        body = self.bodies[st.name]
        assert isinstance(body, E.Reduce)
        node: S.Stmt = S.Store(target, idx, body.identity)
        for k in range(len(sl.leaves) - 1, first_reduce - 1, -1):
            lp = sl.leaves[k]
            if lp.reduce:
                continue
            node = S.For(lp.var, lp.extent, node, lp.kind)
            if tensorize_at is not None and k >= tensorize_at and not any(
                not q.reduce for q in sl.leaves[tensorize_at:k]
            ):
                node = S.Attr("tensorize", st.tensorize[1], st.name, node)  # type: ignore[index]
        return node

    def _target(self, st: Stage, sl: StageLoops) -> tuple[Tensor, tuple[E.Expr, ...]]:
        absolute = tuple(E.substitute(a.var, sl.index) for a in st.axes)
        if st.name not in self.buffers:
            return st.tensor, absolute
        rel = tuple(_minus(i, d.low) for i, d in zip(absolute, sl.domain, strict=True))
        return self.buffers[st.name], rel

    def _rewrite(self, e: E.Expr, sl: StageLoops) -> E.Expr:
        """Axis variables -> leaf-loop expressions; loads of stages -> loads of their buffers."""
        e = E.substitute(e, sl.index)
        return _to_buffers(e, self.buffers, self.loops)


class AccelLowering(Lowering):
    """The accelerator's: stages in a scope get buffers in its scratchpad (one copy per enclosing
    virtual thread), checked against its capacity and element shape; only outputs are global."""

    def __init__(self, sched: Schedule, target: AcceleratorTarget) -> None:
        super().__init__(sched)
        self.target = target
        self.scratchpad: dict[str, tuple[int, str]] = {}

    # -- buffers --------------------------------------------------------------------------------
    def allocate(self) -> None:
        used: dict[str, int] = {}
        detail: dict[str, list[str]] = {}
        for st in self.order:
            if st.scope == "global":
                continue
            sl = self.loops[st.name]
            shape = tuple(d.extent for d in sl.domain)
            self._check_lanes(st, sl)
            alias = self._alias_of(st)
            if alias is not None:
                base = self.buffers[alias].base
            else:
                threads = [lp for lp in sl.outer if lp.kind == "vthread"]
                elems = _prod(shape[:-2])
                stride, coeffs = elems, {}
                for lp in threads:
                    coeffs[lp.var] = stride
                    stride *= lp.extent
                base = Affine(coeffs, used.get(st.scope, 0))
                used[st.scope] = used.get(st.scope, 0) + stride
                copies = f" x {stride // elems} threads" if stride != elems else ""
                detail.setdefault(st.scope, []).append(f"{st.name} {elems}{copies}")
            self.buffers[st.name] = S.Buffer(st.name, shape, st.tensor.dtype, None, st.scope, base)
        self.scratchpad = {scope: (n, ", ".join(detail[scope])) for scope, n in used.items()}
        check_capacity(self.scratchpad, self.target)

    def _check_lanes(self, st: Stage, sl: StageLoops) -> None:
        lanes = self.target.scope(st.scope).lanes
        have = tuple(d.extent for d in sl.domain[-2:])
        origin = all(not d.low.coeffs and d.low.const == 0 for d in sl.domain[-2:])
        if len(sl.domain) < 2 or have != lanes or not origin:
            raise ScheduleError(
                f"stage {st.name} in scope {st.scope}: its two innermost dimensions must be one "
                f"whole {st.scope} element {lanes}, not {have}"
            )

    def _alias_of(self, st: Stage) -> str | None:
        """An element-wise acc stage computes in place over its only producer's buffer."""
        if st.scope != "acc" or st.reduce_axes:
            return None
        ident = tuple(a.var for a in st.axes)
        for load in E.loads(self.bodies[st.name]):
            prod = self.sched.stages.get(load.tensor.name)
            if (prod is None or prod.inline or prod.scope != "acc" or prod.name not in self.buffers
                    or prod.attach != st.attach or load.indices != ident):
                continue
            readers = [r for r in self.live if any(ld.tensor is prod.tensor
                                                   for ld in E.loads(self.bodies[r.name]))]
            same = self.loops[prod.name].domain == self.loops[st.name].domain
            if same and [r.name for r in readers] == [st.name]:
                return prod.name
        return None

    def check_placement(self, st: Stage) -> None:
        if st.scope == "global" and not self.sched.is_output(st.name):
            raise ScheduleError(f"stage {st.name} would be stored in DRAM: only outputs are; set "
                                "its scope or inline it")


def lower(sched: Schedule, target: AcceleratorTarget, name: str = "main") -> LoweredFunc:
    _check_accelerator(sched)
    lw = AccelLowering(sched, target)
    lw.infer()
    lw.allocate()
    body = lw.build()
    outputs = list(sched.outputs)
    return LoweredFunc(name, body, list(sched.inputs.values()), outputs, lw.buffers, lw.scratchpad)


def check_capacity(scratchpad: dict[str, tuple[int, str]], target: AcceleratorTarget) -> None:
    """Raise ScheduleError when a scope's buffers (elements, what) exceed its scratchpad."""
    for scope, (n, what) in scratchpad.items():
        depth = target.scope(scope).depth
        if n > depth:
            raise ScheduleError(
                f"buffers in scope {scope} need {n} elements ({what}), "
                f"more than the {depth} the {scope} scratchpad holds"
            )


# -- helpers -------------------------------------------------------------------------------------


def _check_accelerator(sched: Schedule) -> None:
    """What only the host lowering takes: max/min reductions, floats, host loop records."""
    for st in sched.stages.values():
        if isinstance(st.body, E.Reduce) and st.body.op != "sum":
            raise ScheduleError(f"stage {st.name}: the accelerator computes sum reductions only, "
                                f"not {st.body.op}")
        if E.is_float(st.tensor.dtype):
            raise ScheduleError(f"stage {st.name}: the accelerator computes on integers, not "
                                f"{st.tensor.dtype}")
        if st.scope in ("shared", "local"):
            raise ScheduleError(f"stage {st.name} is in scope {st.scope}, a GPU scope; the accelerator's "
                                "scopes are inp, wgt and acc")
        for axis, kind in st.loop_kinds.items():
            what = "a host" if kind == "vectorize" else "a GPU"
            raise ScheduleError(f"{kind}({st.name}, {axis}) is {what} record; the accelerator "
                                "lowering does not take it")


def _to_buffers(e: E.Expr, buffers: dict[str, S.Buffer], loops: dict[str, StageLoops]) -> E.Expr:
    if isinstance(e, E.Load):
        idx = tuple(_to_buffers(i, buffers, loops) for i in e.indices)
        name = e.tensor.name
        if name in buffers:
            dom = loops[name].domain
            return E.Load(buffers[name], tuple(_minus(i, d.low) for i, d in zip(idx, dom, strict=True)))
        return E.Load(e.tensor, idx)
    return E.rebuild(e, lambda c: _to_buffers(c, buffers, loops))


def _minus(e: E.Expr, low: Affine) -> E.Expr:
    form = affine(e)
    if form is not None:
        return (form + low.scale(-1)).to_expr()
    return e if not low.coeffs and low.const == 0 else e - low.to_expr()


def _inline(sched: Schedule, body: E.Expr) -> E.Expr:
    if isinstance(body, E.Load):
        idx = tuple(_inline(sched, i) for i in body.indices)
        st = sched.stages.get(body.tensor.name)
        if st is not None and st.inline:
            mapping = {a.var: i for a, i in zip(st.axes, idx, strict=True)}
            return _inline(sched, E.substitute(st.body, mapping))
        return E.Load(body.tensor, idx)
    return E.rebuild(body, lambda c: _inline(sched, c))


def _topological(sched: Schedule, live: list[Stage]) -> list[Stage]:
    names = {s.name for s in live}
    order: list[Stage] = []
    seen: set[str] = set()

    def visit(st: Stage) -> None:
        if st.name in seen:
            return
        seen.add(st.name)
        for ld in E.loads(_inline(sched, st.body)):
            if ld.tensor.name in names:
                visit(sched.stages[ld.tensor.name])
        order.append(st)

    for s in live:
        visit(s)
    return order


def _prod(xs: tuple[int, ...]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
