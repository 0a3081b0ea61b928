"""Explicit vector code for a short vectorised loop whose body is one store (a register tile's
lanes), instead of leaving it to LLVM's loop vectoriser.

A loop `for v in 0..n (vectorize): t[..v..] = f(...)` is emitted as one `<n x T>` store of
`f` computed lane-wise, when every load either does not move with `v` (a scalar load, splat
across the lanes) or moves by one element per iteration (one contiguous vector load), and `f`
uses only constants, casts between numeric types (not float -> int) and + - * (and integer
min/max).  That is what a convolution's or gemm's register tile computes: `acc[p, k] +=
x[...] * w[..., k]`.  Because the loop is gone, LLVM fully unrolls the pixel loop around it and
SROA keeps the small accumulator tile in registers over the whole reduction, which the loop
vectoriser (it vectorises innermost loops one at a time, after unrolling) does not do.

The lanes compute exactly what the serial loop computes: each lane's operations are the
scalar ones, in the same order (`contract` float products may fuse into FMAs as the scalar code
may).  A loop is refused (None: the caller emits the loop and its vectoriser hints) where that
would not hold: a load of the stored tensor at another place than the store's (a dependence
between iterations), or a stored index that does not move by one element per iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.scalar import is_float
from compiler.tir import stmt as S

if TYPE_CHECKING:
    from compiler.codegen.llvm.emit import _Emitter

MAX_LANES = 32  # longer loops stay with LLVM's loop vectoriser (and its remainder handling)
_INT_OPS = ("+", "-", "*", "min", "max")
_FLOAT_OPS = ("+", "-", "*")


def flat_form(shape: tuple[int, ...], indices: tuple[E.Expr, ...]) -> Affine | None:
    """The row-major element offset of `indices` into `shape` as an affine form, or None."""
    form, stride = Affine(), 1
    for size, idx in zip(reversed(shape), reversed(indices), strict=True):
        lin = affine(idx)
        if lin is None:
            return None
        form = form + lin.scale(stride)
        stride *= size
    return form


def vectorizable(loop: S.For) -> bool:
    """Whether `loop` is a short vectorised loop of one store that `emit_vector` can emit."""
    if loop.kind != "vectorize" or not 2 <= loop.extent <= MAX_LANES or not isinstance(loop.body, S.Store):
        return False
    store, var = loop.body, loop.var
    target = flat_form(store.tensor.shape, store.indices)
    if target is None or target.coeff(var) != 1:
        return False
    return _supported(store.value, var, store.tensor.name, target)


def _supported(e: E.Expr, var: E.Var, stored: str, target: Affine) -> bool:
    if isinstance(e, E.Const | E.FloatConst):
        return True
    if isinstance(e, E.Load):
        form = flat_form(e.tensor.shape, e.indices)
        if form is None:
            return var not in _index_vars(e) and e.tensor.name != stored
        if e.tensor.name == stored and form != target:
            return False
        return form.coeff(var) in (0, 1) and all(var not in E.free_vars(i) or affine(i) is not None
                                                   for i in e.indices)
    if isinstance(e, E.Cast):
        if is_float(e.value.dtype) and not is_float(e.dtype):
            return False
        return e.dtype != "bool" and e.value.dtype != "bool" and _supported(e.value, var, stored, target)
    if isinstance(e, E.Bin):
        ops = _FLOAT_OPS if is_float(e.a.dtype) else _INT_OPS
        return (e.op in ops and _supported(e.a, var, stored, target)
                and _supported(e.b, var, stored, target))
    return False


def _index_vars(load: E.Load) -> set[E.Var]:
    out: set[E.Var] = set()
    for i in load.indices:
        out |= E.free_vars(i)
    return out


def emit_vector(em: _Emitter, loop: S.For) -> None:
    """Emit `loop` (vectorizable) as vector operations at the builder's position."""
    n, var = loop.extent, loop.var
    store = loop.body
    assert isinstance(store, S.Store)
    em.loops[var] = ir.Constant(ir.IntType(64), 0)  # lane 0's addresses
    try:
        value = _VectorExpr(em, var, n).emit(store.value)
        t = em.tensors[store.tensor.name]
        # llvmlite types a stack temporary's pointer (float*), and its store checks the value's
        # type against it: the store instruction is built directly (LLVM's pointers are opaque)
        out = ir.instructions.StoreInstr(em.b.block, value, em._address(t, store.indices))
        out.align = max(1, E.BITS[t.dtype] // 8)
        em.b._insert(out)
    finally:
        del em.loops[var]


class _VectorExpr:
    def __init__(self, em: _Emitter, var: E.Var, n: int) -> None:
        self.em, self.var, self.n = em, var, n

    def vtype(self, dtype: str) -> ir.VectorType:
        from compiler.codegen.llvm.emit import LL_TYPES

        return ir.VectorType(LL_TYPES[dtype], self.n)

    def splat(self, scalar: ir.Value, dtype: str) -> ir.Value:
        b = self.em.b
        vt = self.vtype(dtype)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(ir.IntType(32), 0))
        mask = ir.Constant(ir.VectorType(ir.IntType(32), self.n), [0] * self.n)
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), mask)

    def emit(self, e: E.Expr) -> ir.Value:
        em, b = self.em, self.em.b
        if isinstance(e, E.Const | E.FloatConst):
            return self.splat(em._expr(e), e.dtype)
        if isinstance(e, E.Load):
            form = flat_form(e.tensor.shape, e.indices)
            if form is None or form.coeff(self.var) == 0:
                return self.splat(em._expr(e), e.dtype)
            t = em.tensors[e.tensor.name]
            load = b.load(em._address(t, e.indices), typ=self.vtype(t.dtype))
            load.align = max(1, E.BITS[t.dtype] // 8)
            return load
        if isinstance(e, E.Cast):
            return self._cast(self.emit(e.value), e.value.dtype, e.dtype)
        assert isinstance(e, E.Bin)
        a, c = self.emit(e.a), self.emit(e.b)
        if is_float(e.a.dtype):
            value = {"+": b.fadd, "-": b.fsub, "*": b.fmul}[e.op](a, c)
            if em.contract and e.op in ("+", "*"):
                value.flags.append("contract")
            return value
        if e.op in ("min", "max"):
            signed = not e.a.dtype.startswith("uint")
            cmp = b.icmp_signed if signed else b.icmp_unsigned
            return b.select(cmp("<" if e.op == "min" else ">", a, c), a, c)
        return {"+": b.add, "-": b.sub, "*": b.mul}[e.op](a, c)

    def _cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        b, ty = self.em.b, self.vtype(dst)
        signed = not src.startswith("uint")
        if is_float(dst):
            if is_float(src):
                return v
            return b.sitofp(v, ty) if signed else b.uitofp(v, ty)
        width, src_width = E.BITS[dst], E.BITS[src]
        if width < src_width:
            return b.trunc(v, ty)
        if width > src_width:
            return b.sext(v, ty) if signed else b.zext(v, ty)
        return v
