"""`lower_alu`: element-wise nests over acc marked `pragma alu` become ALU micro-ops.

The value is decomposed along its spine into in-place operations on the destination, each one
ALU instruction kernel: `min(max((x + bias) >> 8, 0), 127)` is ADD (tensor), SHR (imm 8),
MAX (imm 0), MIN (imm 127).  Subtraction and left shift of a constant become ADD and SHR with
the negated constant.  When the spine starts from another buffer than the destination, the
destination is first cleared (MUL 0) and the source added.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import ScheduleError
from compiler.passes.tensorize import elem_index
from compiler.target.accel import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.tir import stmt as S
from compiler.tir.visit import perfect_nest, post_order, wrap_loops
from hw import isa

_COMMUTATIVE = ("+", "*", "min", "max")


@dataclass(frozen=True)
class _Op:
    op: isa.AluOp
    imm: int | None = None
    src: E.Load | None = None


def lower_alu(body: S.Stmt, target: AcceleratorTarget) -> S.Stmt:
    def visit(node: S.Stmt) -> S.Stmt:
        if isinstance(node, S.Attr) and node.key == "pragma" and node.value == "alu":
            return _alu(node, target)
        return node

    return post_order(body, visit)


def _alu(node: S.Attr, target: AcceleratorTarget) -> S.Stmt:
    where = f"alu pragma of stage {node.stage}"
    loops, store = perfect_nest(node.body)
    if not isinstance(store, S.Store):
        raise ScheduleError(f"{where}: the loops from the pragma inward must hold only the operation")
    dst = store.tensor
    if not isinstance(dst, S.Buffer) or dst.scope != "acc":
        raise ScheduleError(f"{where}: the ALU writes the acc scope, not {dst.name}")
    lanes = [v for v, _ in loops[-2:]]
    if len(loops) < 2 or list(store.indices[-2:]) != lanes:
        raise ScheduleError(f"{where}: the two innermost loops must run over the acc element's lanes")
    leaf, ops = _chain(store.value, where, target)
    dst_idx = elem_index(dst, store.indices, where)
    if not isinstance(leaf.tensor, S.Buffer) or elem_index(leaf.tensor, leaf.indices, where) != dst_idx:
        ops = [_Op(isa.AluOp.MUL, imm=0), _Op(isa.AluOp.ADD, src=leaf), *ops]
    outer = loops[:-2]
    return S.seq(*(wrap_loops(outer, _uop(node.stage, where, op, dst_idx, lanes, target)) for op in ops))


def _uop(stage: str, where: str, op: _Op, dst: Affine, lanes: list[E.Var],
         target: AcceleratorTarget) -> S.Uop:
    if op.src is None:
        low, high = target.imm_range
        if not low <= op.imm <= high:  # type: ignore[operator]
            raise ScheduleError(f"{where}: immediate {op.imm} of {op.op.name} does not fit the ALU's "
                                f"16-bit field [{low}, {high}]")
        return S.Uop("alu", dst, alu_op=op.op, use_imm=True, imm=op.imm or 0, stage=stage)
    src = op.src
    if not isinstance(src.tensor, S.Buffer) or src.tensor.scope != "acc":
        raise ScheduleError(f"{where}: tensor operand {src} must be in the acc scope (cache_read it "
                            "into acc)")
    if list(src.indices[-2:]) != lanes:
        raise ScheduleError(f"{where}: tensor operand {src} must be indexed by the lanes last")
    return S.Uop("alu", dst, elem_index(src.tensor, src.indices, where), alu_op=op.op, stage=stage)


def _chain(e: E.Expr, where: str, target: AcceleratorTarget) -> tuple[E.Load, list[_Op]]:
    """(the spine's leaf load, the operations applied to it in order)."""
    if isinstance(e, E.Cast):
        return _chain(e.value, where, target)
    if isinstance(e, E.Load):
        return e, []
    if not isinstance(e, E.Bin) or e.op not in (*target.alu_ops, "-", "<<"):
        raise ScheduleError(f"{where}: {e} is not an ALU operation (the ALU has "
                            f"{', '.join(target.alu_ops)}, and - or << by a constant)")
    a, b = _strip(e.a), _strip(e.b)
    if isinstance(a, E.Const) and e.op in _COMMUTATIVE:
        a, b = b, a
    if isinstance(b, E.Const):
        leaf, ops = _chain(a, where, target)
        return leaf, [*ops, _imm_op(e.op, b.value, target)]
    if e.op not in _COMMUTATIVE:
        raise ScheduleError(f"{where}: {e.op} of two tensors is not an ALU operation")
    if isinstance(b, E.Load) and not isinstance(a, E.Load):
        leaf, ops = _chain(a, where, target)
        return leaf, [*ops, _Op(target.alu_ops[e.op], src=b)]
    if isinstance(a, E.Load) and not isinstance(b, E.Load):
        leaf, ops = _chain(b, where, target)
        return leaf, [*ops, _Op(target.alu_ops[e.op], src=a)]
    if isinstance(a, E.Load) and isinstance(b, E.Load):
        return a, [_Op(target.alu_ops[e.op], src=b)]
    raise ScheduleError(f"{where}: {e} combines two computed values; split it into stages")


def _strip(e: E.Expr) -> E.Expr:
    while isinstance(e, E.Cast):
        e = e.value
    return e


def _imm_op(op: str, value: int, target: AcceleratorTarget) -> _Op:
    if op == "-":
        return _Op(isa.AluOp.ADD, imm=-value)
    if op == "<<":
        return _Op(isa.AluOp.SHR, imm=-value)
    return _Op(target.alu_ops[op], imm=value)
