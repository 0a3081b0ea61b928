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

One int8 form more: a sum of two widened int16 products whose vector operands are the two
halves of interleaved pairs, `int32(a[i]) * int32(w[2v]) + int32(a[i+1]) * int32(w[2v+1])`
(the pair-packed convolution's reduction step, compiler.ops.cpu.convbase), is emitted as one
contiguous load of the pairs, a broadcast of the pair (a[i], a[i+1]), a widening multiply and
the sum of each lane's even and odd products: the form LLVM's x86 back end selects as
vpmaddwd (16 int16 products summed pairwise into 8 int32 in one instruction on AVX2), which
its own vectoriser never produces from the scalar loop.  Exact: each sum of two int16 products
fits int32 but for (-32768)**2 * 2, which int16 data widened from int8 never reaches, and
int32 adds wrap in any order.

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
        if pair_dot(e, var) is not None:
            return True
        ops = _FLOAT_OPS if is_float(e.a.dtype) else _INT_OPS
        return (e.op in ops and _supported(e.a, var, stored, target)
                and _supported(e.b, var, stored, target))
    return False


PairDot = tuple[E.Load, E.Load]  # (the first of the broadcast pair, the first of the lane pairs)


def pair_dot(e: E.Expr, var: E.Var) -> PairDot | None:
    """(a, w) when `e` is `int32(a) * int32(w) + int32(a') * int32(w')` over int16 loads in
    either order, where a' is the element after a and neither moves with `var`, and w' the
    element after w, both moving by two elements per lane; else None."""
    if not (isinstance(e, E.Bin) and e.op == "+" and e.dtype == "int32"):
        return None
    first, second = _widened_product(e.a, var), _widened_product(e.b, var)
    if first is None or second is None:
        return None
    (a0, af0, w0, wf0), (a1, af1, w1, wf1) = first, second
    one = Affine({}, 1)
    if a0.tensor.name != a1.tensor.name or w0.tensor.name != w1.tensor.name:
        return None
    if af0 + one == af1 and wf0 + one == wf1:
        return a0, w0
    if af1 + one == af0 and wf1 + one == wf0:
        return a1, w1
    return None


def _widened_product(e: E.Expr, var: E.Var) -> tuple[E.Load, Affine, E.Load, Affine] | None:
    """(a, its form, w, its form) for `int32(a) * int32(w)` (either order) of int16 loads, `a`
    fixed across the lanes and `w` moving by two elements per lane."""
    if not (isinstance(e, E.Bin) and e.op == "*"):
        return None
    loads = []
    for side in (e.a, e.b):
        if not (isinstance(side, E.Cast) and side.dtype == "int32" and isinstance(side.value, E.Load)
                and side.value.dtype == "int16"):
            return None
        form = flat_form(side.value.tensor.shape, side.value.indices)
        if form is None:
            return None
        loads.append((side.value, form))
    loads.sort(key=lambda lf: lf[1].coeff(var))
    (a, af), (w, wf) = loads
    if af.coeff(var) != 0 or wf.coeff(var) != 2:
        return None
    return a, af, w, wf


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
        pair = pair_dot(e, self.var)
        if pair is not None:
            return self._pair_dot(*pair)
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

    def _pair_dot(self, a: E.Load, w: E.Load) -> ir.Value:
        """Lane v: a[0] * w[2v] + a[1] * w[2v+1], widened to int32 (vpmaddwd's form)."""
        em, b, n = self.em, self.em.b, self.n
        i16, i32 = ir.IntType(16), ir.IntType(32)
        wide = b.load(em._address(em.tensors[w.tensor.name], w.indices), typ=ir.VectorType(i16, 2 * n))
        wide.align = 2
        pair = b.load(em._address(em.tensors[a.tensor.name], a.indices), typ=ir.VectorType(i16, 2))
        pair.align = 2
        mask = ir.Constant(ir.VectorType(i32, 2 * n), [v % 2 for v in range(2 * n)])
        pairs = b.shuffle_vector(pair, ir.Constant(pair.type, ir.Undefined), mask)
        product = b.mul(b.sext(wide, ir.VectorType(i32, 2 * n)), b.sext(pairs, ir.VectorType(i32, 2 * n)))
        undef = ir.Constant(product.type, ir.Undefined)
        even = b.shuffle_vector(product, undef, ir.Constant(ir.VectorType(i32, n), list(range(0, 2 * n, 2))))
        odd = b.shuffle_vector(product, undef, ir.Constant(ir.VectorType(i32, n), list(range(1, 2 * n, 2))))
        return b.add(even, odd)

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
