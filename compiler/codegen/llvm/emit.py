"""Loop IR (as compiler.lower.cpu lowers it) -> LLVM IR (llvmlite.ir): one function per kernel taking
raw pointers.

`void NAME(ptr noalias in0, ..., ptr noalias out0, ...)`: every tensor is a dense row-major
array, inputs first, then outputs.  Temporaries are `alloca`s in the entry block (scope "stack")
or `malloc`ed and freed (scope "heap": the one part that assumes a C library, as on the CPU).
Loops count in i64 from 0; an affine index is computed in i64 straight from the loop counters (so
LLVM sees strided accesses it can vectorise), any other index in the expression's own dtype, then
sign-extended.

Semantics follow compiler.te.scalar: integers wrap (no nsw/nuw on value arithmetic), `//` and `%`
floor like Python, shifts by more than the width saturate as Python's do, float -> integer casts
saturate (llvm.fptosi.sat), no fast-math flags, so float element-wise results are the IEEE ones.
A division by a zero known only at run time gives the dividend (`//`) or 0 (`%`) instead of a trap.
A select whose branches load memory becomes a branch, so an out-of-range padded read never runs.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.llvm import fmath, vector
from compiler.errors import TensorExprError
from compiler.lower.lower import LoweredFunc
from compiler.te import expr as E
from compiler.te.affine import Affine, affine
from compiler.te.scalar import int_range, is_float, wrap
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S

I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
LL_TYPES: dict[str, ir.Type] = {
    "int8": ir.IntType(8), "uint8": ir.IntType(8), "int16": ir.IntType(16),
    "int32": ir.IntType(32), "int64": ir.IntType(64), "bool": ir.IntType(1), "float32": F32,
}


def emit_module(func: LoweredFunc, triple: str = "", contract: bool = False) -> ir.Module:
    """An LLVM module holding the one function of `func` (named `func.name`); with `contract`,
    float multiplies and adds carry LLVM's `contract` flag, so a product and the sum it feeds
    may become one fused multiply-add (rounded once: closer to the exact value, not to numpy's)."""
    module = ir.Module(name=func.name)
    if triple:
        module.triple = triple
    _Emitter(func, module, contract).run()
    return module


def _signed(dtype: str) -> bool:
    return not dtype.startswith("uint") and dtype != "bool"


class _Emitter:
    def __init__(self, func: LoweredFunc, module: ir.Module, contract: bool = False) -> None:
        self.func, self.module, self.contract = func, module, contract
        args = func.inputs + func.outputs
        for t in args:
            if t.dtype == "bool":
                raise TensorExprError(f"kernel {func.name}: tensor {t.name} is bool; host kernels "
                                      "take numeric tensors only")
        fnty = ir.FunctionType(ir.VoidType(), [PTR] * len(args))
        self.fn = ir.Function(module, fnty, name=func.name)
        self.fn.attributes.add("nounwind")
        self.ptrs: dict[str, ir.Value] = {}
        self.tensors: dict[str, Tensor] = {}
        for t, arg in zip(args, self.fn.args, strict=True):
            arg.name = t.name
            arg.add_attribute("noalias")
            self.ptrs[t.name], self.tensors[t.name] = arg, t
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.loops: dict[E.Var, ir.Value] = {}
        self.math = fmath.MathEmitter(self.b, module)

    def run(self) -> None:
        heap = self._temporaries()
        self._stmt(self.func.body)
        free = self._declare("free", ir.FunctionType(ir.VoidType(), [PTR]))
        for ptr in heap:
            self.b.call(free, [ptr])
        self.b.ret_void()

    def _temporaries(self) -> list[ir.Value]:
        heap = []
        for buf in self.func.buffers.values():
            ty, n = LL_TYPES[buf.dtype], _elems(buf.shape)
            if buf.scope == "stack":
                ptr = self.b.alloca(ty, size=n, name=buf.name)
                ptr.align = 64
            else:
                malloc = self._declare("malloc", ir.FunctionType(PTR, [I64]))
                nbytes = n * max(1, E.BITS[buf.dtype] // 8)
                ptr = self.b.call(malloc, [ir.Constant(I64, nbytes)], name=buf.name)
                heap.append(ptr)
            self.ptrs[buf.name], self.tensors[buf.name] = ptr, buf
        return heap

    def _declare(self, name: str, fnty: ir.FunctionType) -> ir.Function:
        existing = self.module.globals.get(name)
        return existing if existing is not None else ir.Function(self.module, fnty, name=name)

    # -- statements -------------------------------------------------------------------------
    def _stmt(self, node: S.Stmt) -> None:
        if isinstance(node, S.Seq):
            for s in node.stmts:
                self._stmt(s)
        elif isinstance(node, S.For):
            self._loop(node)
        elif isinstance(node, S.Store):
            t = self.tensors[node.tensor.name]
            value = self._expr(node.value)
            store = self.b.store(value, self._address(t, node.indices))
            store.align = _align(t.dtype)
        else:
            raise TypeError(f"host code generation: {type(node).__name__} is not a host "
                            "statement (accelerator IR?)")

    def _loop(self, node: S.For) -> None:
        """A bottom-tested loop: extents are at least 1, so the body runs before the test; a short
        vectorised loop of one store is emitted as vector operations (compiler.codegen.llvm.vector)."""
        if vector.vectorizable(node):
            vector.emit_vector(self, node)
            return
        pre = self.b.block
        body = self.fn.append_basic_block(f"{node.var.name}.body")
        self.b.branch(body)
        self.b.position_at_end(body)
        iv = self.b.phi(I64, name=node.var.name)
        iv.add_incoming(ir.Constant(I64, 0), pre)
        self.loops[node.var] = iv
        self._stmt(node.body)
        nxt = self.b.add(iv, ir.Constant(I64, 1), flags=("nuw", "nsw"))
        iv.add_incoming(nxt, self.b.block)
        done = self.fn.append_basic_block(f"{node.var.name}.exit")
        more = self.b.icmp_unsigned("<", nxt, ir.Constant(I64, node.extent))
        branch = self.b.cbranch(more, body, done)
        if node.kind == "vectorize":
            branch.set_metadata("llvm.loop", self._loop_hints(node.extent))
        self.b.position_at_end(done)
        del self.loops[node.var]

    def _loop_hints(self, extent: int) -> ir.MDValue:
        """The loop ID of a vectorised loop: `!N = !{!N, vectorize.enable, unroll.disable,
        interleave.count}`.

        Without unroll.disable LLVM fully unrolls a short loop before the loop vectoriser runs,
        which then vectorises the enclosing loop instead (measured: a conv 15x slower).  But
        unroll.disable also stops the vectoriser from interleaving, which a reduction needs to
        hide its add latency, so the count is given back: 4 for long loops (measured: conv 2x
        faster than 1), fewer for short ones, whose few vectors cannot fill four."""
        md = self.module
        count = 4 if extent >= 64 else 2 if extent >= 32 else 1
        pairs = [("llvm.loop.vectorize.enable", [ir.Constant(ir.IntType(1), 1)]),
                 ("llvm.loop.unroll.disable", []),
                 ("llvm.loop.interleave.count", [ir.Constant(ir.IntType(32), count)])]
        hints = [md.add_metadata([ir.MetaDataString(md, key), *value]) for key, value in pairs]
        node = ir.values.MDValue(md, hints, name=str(len(md.metadata)))
        node.operands = (node, *hints)  # LLVM requires a loop ID's first operand to be itself
        return node

    # -- addresses ----------------------------------------------------------------------------
    def _address(self, t: Tensor, indices: tuple[E.Expr, ...]) -> ir.Value:
        """&t[indices], row-major; affine parts in i64 with nsw (in-bounds indices do not wrap)."""
        form, rest, stride = Affine(), [], 1
        for size, idx in zip(reversed(t.shape), reversed(indices), strict=True):
            lin = affine(idx)
            if lin is not None:
                form = form + lin.scale(stride)
            else:
                rest.append((idx, stride))
            stride *= size
        offset = self._affine_i64(form)
        for idx, k in rest:
            term = self.b.sext(self._expr(idx), I64) if E.BITS[idx.dtype] < 64 else self._expr(idx)
            offset = self.b.add(offset, self.b.mul(term, ir.Constant(I64, k), flags=("nsw",)), flags=("nsw",))
        return self.b.gep(self.ptrs[t.name], [offset], inbounds=True, source_etype=LL_TYPES[t.dtype])

    def _affine_i64(self, form: Affine) -> ir.Value:
        out: ir.Value = ir.Constant(I64, form.const)
        for var, c in sorted(form.coeffs.items(), key=lambda item: item[0].name):
            term = self._loop_var(var)
            if c != 1:
                term = self.b.mul(term, ir.Constant(I64, c), flags=("nsw",))
            out = self.b.add(out, term, flags=("nsw",))
        return out

    def _loop_var(self, var: E.Var) -> ir.Value:
        if var not in self.loops:
            raise TensorExprError(f"kernel {self.func.name}: variable {var.name} is not a loop")
        return self.loops[var]

    # -- expressions --------------------------------------------------------------------------
    def _expr(self, e: E.Expr) -> ir.Value:
        if isinstance(e, E.Const):
            return _int_constant(e.value, e.dtype)
        if isinstance(e, E.FloatConst):
            return ir.Constant(LL_TYPES[e.dtype], e.value)
        if isinstance(e, E.Var):
            return self.b.trunc(self._loop_var(e), LL_TYPES[e.dtype])
        if isinstance(e, E.Load):
            t = self.tensors[e.tensor.name]
            load = self.b.load(self._address(t, e.indices), typ=LL_TYPES[t.dtype])
            load.align = _align(t.dtype)
            return load
        if isinstance(e, E.Bin):
            return self._bin(e)
        if isinstance(e, E.Cast):
            return self._cast(self._expr(e.value), e.value.dtype, e.dtype)
        if isinstance(e, E.Select):
            return self._select(e)
        if isinstance(e, E.Call):
            return self.math.call(e.name, self._expr(e.args[0]))
        raise TensorExprError(f"kernel {self.func.name}: cannot generate code for {e}")

    def _bin(self, e: E.Bin) -> ir.Value:
        a, b = self._expr(e.a), self._expr(e.b)
        dtype = e.a.dtype
        if e.op in ("and", "or"):
            return self.b.and_(a, b) if e.op == "and" else self.b.or_(a, b)
        if is_float(dtype):
            return self._float_bin(e.op, a, b)
        if e.op in E.COMPARE:
            cmp = self.b.icmp_signed if _signed(dtype) else self.b.icmp_unsigned
            return cmp(e.op, a, b)
        simple = {"+": self.b.add, "-": self.b.sub, "*": self.b.mul}
        if e.op in simple:
            return simple[e.op](a, b)
        if e.op in ("min", "max"):
            pick = "<" if e.op == "min" else ">"
            cmp = self.b.icmp_signed if _signed(dtype) else self.b.icmp_unsigned
            return self.b.select(cmp(pick, a, b), a, b)
        if e.op in ("//", "%"):
            return _IntDivision(self.b, dtype).emit(e.op, a, b, e.b)
        return _shift(self.b, e.op, a, b, dtype)

    def _float_bin(self, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
        if op in E.COMPARE:
            if op == "!=":  # true for NaN, as in Python and numpy
                return self.b.fcmp_unordered(op, a, b)
            return self.b.fcmp_ordered(op, a, b)
        if op in ("min", "max"):  # NaN-propagating, like numpy.minimum/maximum
            return self.math.intrinsic("llvm.minimum" if op == "min" else "llvm.maximum", a, b)
        ops = {"+": self.b.fadd, "-": self.b.fsub, "*": self.b.fmul, "/": self.b.fdiv}
        value = ops[op](a, b)
        if self.contract and op in ("+", "*"):
            value.flags.append("contract")
        return value

    def _cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        ty = LL_TYPES[dst]
        if is_float(dst):
            return self.b.sitofp(v, ty) if _signed(src) else self.b.uitofp(v, ty)
        if is_float(src):  # saturating: NaN -> 0, out of range -> the nearest bound
            return self._float_to_int(v, dst)
        if dst == "bool":
            return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        width, src_width = ty.width, v.type.width
        if width < src_width:
            return self.b.trunc(v, ty)
        if width > src_width:
            return self.b.sext(v, ty) if _signed(src) else self.b.zext(v, ty)
        return v

    def _float_to_int(self, v: ir.Value, dst: str) -> ir.Value:
        ty = LL_TYPES[dst]
        if ty.width > 16:  # the bounds are not all float32 values: LLVM's saturating cast
            name = "llvm.fptosi.sat" if _signed(dst) else "llvm.fptoui.sat"
            fn = self._declare(f"{name}.i{ty.width}.f32", ir.FunctionType(ty, [F32]))
            return self.b.call(fn, [v])
        # Narrow targets: clamp to the (exact) bounds, convert, NaN -> 0; vectorises better
        # than llvm.fptosi.sat, which x86 expands element by element.
        low, high = int_range(dst)
        above = self.math.intrinsic("llvm.maxnum", v, ir.Constant(F32, low))
        clamped = self.math.intrinsic("llvm.minnum", above, ir.Constant(F32, high))
        wide = self.b.fptosi(clamped, I32)
        value = self.b.trunc(self.b.select(self.b.fcmp_unordered("uno", v, v), ir.Constant(I32, 0), wide), ty)
        return value

    def _select(self, e: E.Select) -> ir.Value:
        cond = self._expr(e.cond)
        if not E.loads(e.then) and not E.loads(e.other):
            return self.b.select(cond, self._expr(e.then), self._expr(e.other))
        # A branch, so that a load guarded by the condition (a padded read) never executes.
        with self.b.if_else(cond) as (then, other):
            with then:
                v_then, b_then = self._expr(e.then), self.b.block
            with other:
                v_other, b_other = self._expr(e.other), self.b.block
        phi = self.b.phi(LL_TYPES[e.dtype])
        phi.add_incoming(v_then, b_then)
        phi.add_incoming(v_other, b_other)
        return phi


class _IntDivision:
    """Python's floor division and modulo on wrapping integers, never trapping."""

    def __init__(self, b: ir.IRBuilder, dtype: str) -> None:
        self.b, self.dtype = b, dtype

    def emit(self, op: str, a: ir.Value, d: ir.Value, divisor: E.Expr) -> ir.Value:
        if isinstance(divisor, E.Const) and divisor.value == 0:
            raise TensorExprError(f"division by the constant zero ({op} 0)")
        zero, one = ir.Constant(d.type, 0), ir.Constant(d.type, 1)
        if not _signed(self.dtype):
            if not isinstance(divisor, E.Const):  # d == 0 would trap: divide by 1
                d = self.b.select(self.b.icmp_unsigned("==", d, zero), one, d)
            return self.b.udiv(a, d) if op == "//" else self.b.urem(a, d)
        if isinstance(divisor, E.Const) and divisor.value != -1:
            safe, minus_one = d, None
        else:  # d == 0 would trap, MIN / -1 would overflow: divide by 1 and fix up
            minus_one = self.b.icmp_signed("==", d, ir.Constant(d.type, -1))
            bad = self.b.or_(self.b.icmp_signed("==", d, zero), minus_one)
            safe = self.b.select(bad, one, d)
        q, r = self.b.sdiv(a, safe), self.b.srem(a, safe)
        # floor: when the remainder is non-zero and its sign differs from the divisor's
        fix = self.b.and_(self.b.icmp_signed("!=", r, zero),
                          self.b.icmp_signed("<", self.b.xor(r, safe), zero))
        if op == "%":
            return self.b.select(fix, self.b.add(r, safe), r)
        q = self.b.select(fix, self.b.sub(q, one), q)
        if minus_one is not None:
            q = self.b.select(minus_one, self.b.sub(zero, a), q)
        return q


def _shift(b: ir.IRBuilder, op: str, a: ir.Value, n: ir.Value, dtype: str) -> ir.Value:
    """`a >> n` / `a << n` with Python's meaning for any n: a negative right shift is a left
    shift, and shifting by the width or more gives the sign (>>) or zero (<<)."""
    width = a.type.width
    top = ir.Constant(a.type, width - 1)
    zero = ir.Constant(a.type, 0)

    def right(k: ir.Value) -> ir.Value:  # k >= 0
        big = b.icmp_unsigned(">", k, top)
        if _signed(dtype):
            return b.ashr(a, b.select(big, top, k))
        return b.select(big, zero, b.lshr(a, b.select(big, top, k)))

    def left(k: ir.Value) -> ir.Value:  # k >= 0
        big = b.icmp_unsigned(">", k, top)
        return b.select(big, zero, b.shl(a, b.select(big, top, k)))

    if op == "<<":
        return left(n)
    negative = b.icmp_signed("<", n, zero)
    return b.select(negative, left(b.sub(zero, n)), right(n))


def _int_constant(value: int, dtype: str) -> ir.Constant:
    """An integer constant in LLVM's two's-complement spelling of its width."""
    ty = LL_TYPES[dtype]
    if dtype == "bool":
        return ir.Constant(ty, int(bool(value)))
    return ir.Constant(ty, wrap(value, f"int{ty.width}"))


def _align(dtype: str) -> int:
    return max(1, E.BITS[dtype] // 8)


def _elems(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n

