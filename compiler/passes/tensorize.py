"""`tensorize`: nests marked `tensorize gemm` become GEMM micro-ops.

The loops from the tensorize axis inward must be the intrinsic's (batch, block_out lanes and the
block_in reduction), and the body must match the intrinsic's expression, declared by the target
in the tensor-expression language, with its inp/wgt operands in the inp/wgt scopes and the
accumulator in acc.  The reduction's zero init under the same mark becomes a reset micro-op.
"""

from __future__ import annotations

from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S
from compiler.tir.visit import flat_index, perfect_nest, post_order


def tensorize(body: S.Stmt, target: AcceleratorTarget) -> S.Stmt:
    def visit(node: S.Stmt) -> S.Stmt:
        if isinstance(node, S.Attr) and node.key == "tensorize":
            if node.value != "gemm":
                raise ScheduleError(f"tensorize({node.stage}): unknown intrinsic {node.value!r}; "
                                    "the accelerator has 'gemm'")
            return _gemm(node, target)
        return node

    return post_order(body, visit)


def elem_index(buf: Tensor, indices: tuple[E.Expr, ...], where: str) -> Affine:
    """The SRAM element index of `buf[indices]` (lane indices dropped)."""
    if not isinstance(buf, S.Buffer):
        raise ScheduleError(f"{where}: {buf.name} is in DRAM, not in a scratchpad")
    return flat_index(buf, indices, where)


def _gemm(node: S.Attr, target: AcceleratorTarget) -> S.Stmt:
    where = f"tensorize({node.stage}, gemm)"
    loops, store = perfect_nest(node.body)
    if not isinstance(store, S.Store):
        raise ScheduleError(f"{where}: the loops from the tensorize axis inward must hold only the "
                            "computation")
    acc = store.tensor
    if not isinstance(acc, S.Buffer) or acc.scope != "acc":
        raise ScheduleError(f"{where}: the result must be in the acc scope")
    b, o = store.indices[-2:]
    lanes = {v: n for v, n in loops}
    if isinstance(store.value, E.Const):
        _check_loops(where, loops, [b, o], target, reduce=False)
        return S.Uop("gemm", elem_index(acc, store.indices, where), reset=True, stage=node.stage)
    value = store.value
    if not (isinstance(value, E.Bin) and value.op == "+" and value.a == E.Load(acc, store.indices)):
        raise ScheduleError(f"{where}: the body {value} is not an accumulation into {acc.name}")
    k_vars = [v for v in lanes if v not in (b, o)]
    if len(k_vars) != 1:
        raise ScheduleError(f"{where}: the loops from the tensorize axis inward are "
                            f"{[str(v) for v, _ in loops]}; the gemm intrinsic needs exactly batch, "
                            "block_out and one block_in reduction loop")
    _check_loops(where, loops, [b, o, k_vars[0]], target, reduce=True)
    intr = target.gemm
    bound = {intr.out.op.axes[0].var: b, intr.out.op.axes[1].var: o,  # type: ignore[union-attr]
             intr.out.op.reduce_axes[0].var: k_vars[0]}  # type: ignore[union-attr]
    operands: dict[str, tuple[Tensor, tuple[E.Expr, ...]]] = {}
    _match(intr.out.op.body.source, value.b, bound, operands, where, target)  # type: ignore[union-attr]
    inp_t, inp_idx = operands["inp"]
    wgt_t, wgt_idx = operands["wgt"]
    return S.Uop("gemm", elem_index(acc, store.indices, where), elem_index(inp_t, inp_idx, where),
                 elem_index(wgt_t, wgt_idx, where), stage=node.stage)


def _check_loops(where: str, loops: list[tuple[E.Var, int]], want: list[E.Expr],
                 target: AcceleratorTarget, reduce: bool) -> None:
    sizes = [target.batch, target.block_out, target.block_in][: len(want)]
    have = {v: n for v, n in loops}
    ok = len(loops) == len(want) and all(
        isinstance(w, E.Var) and have.get(w) == n for w, n in zip(want, sizes, strict=True)
    )
    if not ok:
        shown = ", ".join(f"{v}<{n}" for v, n in loops)
        raise ScheduleError(f"{where}: the loops from the tensorize axis inward are [{shown}]; the "
                            f"intrinsic needs batch x block_out{' x block_in' if reduce else ''} = "
                            f"{' x '.join(map(str, sizes))} over the lanes")


def _scope_of(e: E.Expr) -> str | None:
    """The scope an operand is read from (a pattern's placeholder is named after its scope)."""
    while isinstance(e, E.Cast):
        e = e.value
    if not isinstance(e, E.Load):
        return None
    return e.tensor.scope if isinstance(e.tensor, S.Buffer) else e.tensor.name


def _match(pattern: E.Expr, e: E.Expr, bound: dict[E.Var, E.Expr],
           operands: dict[str, tuple[Tensor, tuple[E.Expr, ...]]], where: str,
           target: AcceleratorTarget) -> None:
    """Structural match of the stage's expression against the intrinsic's."""
    fail = ScheduleError(f"{where}: {e} does not match the intrinsic's {pattern}")
    if isinstance(pattern, E.Load):
        if not isinstance(e, E.Load) or not isinstance(e.tensor, S.Buffer):
            raise fail
        scope = pattern.tensor.name
        if e.tensor.scope != scope:
            raise ScheduleError(f"{where}: operand {e.tensor.name} is in scope {e.tensor.scope}, "
                                f"the intrinsic reads it from {scope}")
        want = [bound[i] for i in pattern.indices]  # type: ignore[index]
        if list(e.indices[-2:]) != want:
            raise ScheduleError(f"{where}: {e} must be indexed by the lanes [{', '.join(map(str, want))}] "
                                "last")
        lanes = set(want) | set(bound.values())
        if any(E.free_vars(i) & lanes for i in e.indices[:-2]):  # type: ignore[arg-type]
            raise ScheduleError(f"{where}: {e} uses lane loops in its outer indices")
        if e.dtype != pattern.dtype:
            raise ScheduleError(f"{where}: {e.tensor.name} is {e.dtype}, the intrinsic reads "
                                f"{pattern.dtype}")
        operands[scope] = (e.tensor, e.indices)
        return
    if type(pattern) is not type(e):
        raise fail
    if isinstance(pattern, E.Bin):
        assert isinstance(e, E.Bin)
        if pattern.op != e.op:
            raise fail
        orders = [(e.a, e.b), (e.b, e.a)] if pattern.op in ("+", "*") else [(e.a, e.b)]
        if len(orders) == 2 and _scope_of(e.a) != _scope_of(pattern.a) and (
                _scope_of(e.b) == _scope_of(pattern.a) or _scope_of(e.a) == _scope_of(pattern.b)):
            orders.reverse()  # the operands' scopes say they are held the other way round
        first: ScheduleError | None = None
        before = dict(operands)
        for a, b in orders:
            try:
                operands.clear()
                operands.update(before)  # what sibling subtrees matched stays
                _match(pattern.a, a, bound, operands, where, target)
                _match(pattern.b, b, bound, operands, where, target)
                return
            except ScheduleError as exc:
                first = first or exc  # the likelier order's reason is the one to report
        assert first is not None
        raise first
    if isinstance(pattern, E.Cast):
        assert isinstance(e, E.Cast)
        if pattern.dtype != e.dtype:
            raise fail
        _match(pattern.value, e.value, bound, operands, where, target)
        return
    raise fail
