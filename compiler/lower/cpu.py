"""Schedule -> loop IR for the host CPU: plain loops over DRAM tensors, no scratchpads.

The same bound inference as the accelerator's (compiler.lower.lower.Lowering, the base of both):
a stage attached with compute_at is computed inside its parent's loop for the region that loop
needs.  Every stage that is neither inlined nor an output gets a temporary buffer of its region's
shape, in scope "stack" when it is small (the code generator puts it in the function's frame,
where LLVM can keep it in registers) or "heap" otherwise.  Loops are serial, or marked
"vectorize" by a Vectorize record.  Accelerator records (scopes, pragmas, tensorize, virtual
threads) raise ScheduleError.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.errors import ScheduleError
from compiler.lower.lower import LoweredFunc, Lowering
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S
from compiler.tir.printer import print_ir
from compiler.tir.verify import CPU, verify, verifying

STACK_BYTES = 64 * 1024  # temporaries up to this size live in the kernel's stack frame


class CpuLowering(Lowering):
    """The CPU's: temporaries for the stages that are not outputs; vectorize records checked."""

    def allocate(self) -> None:
        """A temporary buffer for every stage that is not an output, shaped like its region."""
        for st in self.order:
            if self.sched.is_output(st.name):
                continue
            shape = tuple(d.extent for d in self.loops[st.name].domain)
            nbytes = _elems(shape) * itemsize(st.tensor.dtype)
            scope = "stack" if nbytes <= STACK_BYTES else "heap"
            self.buffers[st.name] = S.Buffer(st.name, shape, st.tensor.dtype, None, scope, Affine())

    def check_loop_kinds(self) -> None:
        """A vectorized axis must be its stage's innermost loop, with no stage computed in it."""
        for st in self.live:
            for axis, kind in st.loop_kinds.items():
                what = f"{kind}({st.name}, {axis})"
                if axis not in st.leaves:
                    raise ScheduleError(f"{what}: {axis} is no longer a loop of {st.name} (split "
                                        f"or fused later); its loops are {', '.join(st.leaves)}")
                if st.leaves[-1] != axis:
                    raise ScheduleError(f"{what}: {axis} is not the innermost loop of {st.name}; "
                                        f"its loops are {', '.join(st.leaves)}")
                if (st.name, axis) in self.children:
                    raise ScheduleError(f"{what}: a stage is computed inside {axis}")


def lower_host(sched: Schedule, name: str = "main",
               inputs: Sequence[Tensor] | None = None) -> LoweredFunc:
    """The host loop IR of `sched`.  `inputs` fixes the order of the input tensors (the kernel's
    argument order); it must name every placeholder the schedule reads, once."""
    _check_host(sched)
    lw = CpuLowering(sched)
    lw.infer()
    lw.check_loop_kinds()
    lw.allocate()
    body = fold_divisions(drop_unit_loops(lw.build()))
    if verifying():
        verify(body, CPU, lw.buffers)
    return LoweredFunc(name, body, _input_order(sched, inputs), list(sched.outputs), lw.buffers)


def drop_unit_loops(node: S.Stmt, zero: dict[E.Var, E.Expr] | None = None) -> S.Stmt:
    """`node` without loops of extent 1 (their variable is 0; affine indices re-simplified), so
    the printed IR of a per-row temporary reads `top[0]`, not `top[top.i]`."""
    zero = {} if zero is None else zero
    if isinstance(node, S.Seq):
        return S.seq(*(drop_unit_loops(s, zero) for s in node.stmts))
    if isinstance(node, S.For):
        if node.extent == 1:
            return drop_unit_loops(node.body, {**zero, node.var: E.const(0)})
        return S.For(node.var, node.extent, drop_unit_loops(node.body, zero), node.kind)
    if isinstance(node, S.Attr):  # the GPU's barrier marks
        return S.Attr(node.key, node.value, node.stage, drop_unit_loops(node.body, zero))
    if isinstance(node, S.Store) and zero:
        indices = tuple(_simplified(E.substitute(i, zero)) for i in node.indices)
        return S.Store(node.tensor, indices, _simplified(E.substitute(node.value, zero)))
    return node


def fold_divisions(node: S.Stmt, ranges: dict[E.Var, int] | None = None) -> S.Stmt:
    """`node` with each `f // d` and `f % d` (f affine over loop variables, d a positive
    constant) replaced by affine forms where the loops' ranges allow: f = d*q + r with every
    coefficient of q's part a multiple of d and 0 <= r < d over the loops gives q and r.  So a
    blocked index such as `wt[k // 8, ..., k % 8]` with k = 8*block + lane reads
    `wt[block, ..., lane]`, an affine access the code generator vectorises."""
    ranges = {} if ranges is None else ranges
    if isinstance(node, S.Seq):
        return S.seq(*(fold_divisions(s, ranges) for s in node.stmts))
    if isinstance(node, S.For):
        return S.For(node.var, node.extent, fold_divisions(node.body, {**ranges, node.var: node.extent}),
                     node.kind)
    if isinstance(node, S.Attr):  # the GPU's barrier marks
        return S.Attr(node.key, node.value, node.stage, fold_divisions(node.body, ranges))
    if isinstance(node, S.Store):
        fold = _Folder(ranges).fold
        return S.Store(node.tensor, tuple(fold(i) for i in node.indices), fold(node.value))
    return node


class _Folder:
    def __init__(self, ranges: dict[E.Var, int]) -> None:
        self.ranges = ranges

    def fold(self, e: E.Expr) -> E.Expr:
        e = E.rebuild(e, self.fold)
        if not (isinstance(e, E.Bin) and e.op in ("//", "%") and isinstance(e.b, E.Const)
                and e.b.value > 0 and e.dtype == E.INDEX):
            return e
        form, d = affine(e.a), e.b.value
        if form is None or any(v not in self.ranges for v in form.coeffs):
            return e
        whole = {v: c // d for v, c in form.coeffs.items() if c % d == 0}
        rest = Affine({v: c for v, c in form.coeffs.items() if c % d}, form.const % d)
        low = rest.const + sum(min(0, c * (self.ranges[v] - 1)) for v, c in rest.coeffs.items())
        high = rest.const + sum(max(0, c * (self.ranges[v] - 1)) for v, c in rest.coeffs.items())
        if low < 0 or high >= d:
            return e
        if e.op == "%":
            return rest.to_expr()
        return Affine(whole, form.const // d).to_expr()


def _simplified(e: E.Expr) -> E.Expr:
    """`e` with its affine index subexpressions in canonical form."""
    form = affine(e) if e.dtype == E.INDEX else None
    return form.to_expr() if form is not None else E.rebuild(e, _simplified)


def print_host(func: LoweredFunc) -> str:
    """The kernel's signature, its temporaries and its loop IR, as text (for tests and
    `--print-ir`)."""
    args = [f"{t.name}: {t.dtype}{list(t.shape)}" for t in func.inputs + func.outputs]
    lines = [f"kernel {func.name}({', '.join(args)})"]
    for buf in func.buffers.values():
        lines.append(f"  {buf.scope} {buf.name}: {buf.dtype}{list(buf.shape)}")
    lines.extend("  " + line for line in print_ir(func.body).splitlines())
    return "\n".join(lines)


def itemsize(dtype: str) -> int:
    """Bytes per element in memory (bool takes a byte)."""
    return max(1, E.BITS[dtype] // 8)


def _check_host(sched: Schedule) -> None:
    for st in sched.stages.values():
        if st.scope != "global":
            raise ScheduleError(f"stage {st.name} is in scope {st.scope}: the host has no "
                                "scratchpads; remove its cache_read/cache_write/set_scope")
        if st.pragmas:
            axis, pragma = next(iter(st.pragmas.items()))
            raise ScheduleError(f"pragma({st.name}, {axis}, {pragma}) is an accelerator record; "
                                "the host lowering does not take it")
        if st.tensorize is not None:
            raise ScheduleError(f"tensorize({st.name}, {st.tensorize[0]}) is an accelerator "
                                "record; the host lowering does not take it")
        gpu = [(axis, kind) for axis, kind in st.loop_kinds.items() if kind != "vectorize"]
        if gpu:
            raise ScheduleError(f"{gpu[0][1]} on {st.name}.{gpu[0][0]} is a GPU record (bind or "
                                "unroll); the host lowering does not take it")
        if st.vthreads:
            raise ScheduleError(f"virtual_thread on stage {st.name} is an accelerator record; the "
                                "host lowering does not take it")


def _input_order(sched: Schedule, inputs: Sequence[Tensor] | None) -> list[Tensor]:
    used = list(sched.inputs.values())
    if inputs is None:
        return used
    names = [t.name for t in inputs]
    if sorted(names) != sorted(t.name for t in used):
        raise ScheduleError(f"inputs {names} do not match the schedule's placeholders "
                            f"{[t.name for t in used]}")
    return [sched.inputs[n] for n in names]


def _elems(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
