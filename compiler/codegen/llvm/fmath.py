"""Float math calls of the TE language as LLVM IR, inline where a libm call would not vectorise.

`exp` and `erf` are straight-line code (no calls, no branches), so the loop vectoriser turns them
into AVX-512 code; they are within a few float32 ulps of the correctly rounded value (exp:
Cody-Waite range reduction and Cephes' degree-5 polynomial, the scaling by 2**n done in two
halves so subnormal results are right; erf: its Taylor series below 0.5, Numerical Recipes'
erfc fit, relative error < 1.2e-7, above).  sqrt, fabs, floor and rint are LLVM intrinsics that
map to single instructions; log and tanh are intrinsics that become libm calls.
"""

from __future__ import annotations

import math

from llvmlite import ir

F32 = ir.FloatType()
I32 = ir.IntType(32)

LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4  # LN2_HI has 9 bits: n * LN2_HI is exact
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
            5.0000001201e-1)  # highest power first
EXP_LOW, EXP_HIGH = -104.0, 89.0  # exp underflows to 0 below, overflows to inf above
# erfc(z) = t * exp(-z*z + P(t)), t = 1 / (1 + z/2), highest power first
ERFC_POLY = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
             0.09678418, 0.37409196, 1.00002368, -1.26551223)
# erf(z) = 2/sqrt(pi) * z * Q(z*z) for small z: Q's Taylor coefficients (-1)^n / (n! (2n+1))
ERF_SERIES = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(5, -1, -1))
ERF_SMALL = 0.5

INTRINSICS = {"log": "llvm.log", "sqrt": "llvm.sqrt", "tanh": "llvm.tanh", "fabs": "llvm.fabs",
              "floor": "llvm.floor", "rint": "llvm.roundeven"}


class MathEmitter:
    """Emits math calls with builder `b` into `module` (declaring intrinsics once)."""

    def __init__(self, b: ir.IRBuilder, module: ir.Module) -> None:
        self.b, self.module = b, module

    def call(self, name: str, x: ir.Value) -> ir.Value:
        if name == "exp":
            return self.exp(x)
        if name == "erf":
            return self.erf(x)
        if name == "rsqrt":
            return self.b.fdiv(_c(1.0), self.intrinsic("llvm.sqrt", x))
        return self.intrinsic(INTRINSICS[name], x)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        """A call of the float32 overload of LLVM intrinsic `name` (e.g. llvm.sqrt.f32)."""
        full = f"{name}.f32"
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(F32, [F32] * len(args)), name=full)
        return self.b.call(fn, list(args))

    def exp(self, x: ir.Value) -> ir.Value:
        b = self.b
        xc = self.intrinsic("llvm.minnum", self.intrinsic("llvm.maxnum", x, _c(EXP_LOW)), _c(EXP_HIGH))
        n = self.intrinsic("llvm.roundeven", b.fmul(xc, _c(LOG2E)))
        r = self._fmuladd(n, _c(-LN2_HI), xc)
        r = self._fmuladd(n, _c(-LN2_LO), r)
        p = self._horner(r, EXP_POLY)
        y = b.fadd(self._fmuladd(p, b.fmul(r, r), r), _c(1.0))
        k = b.fptosi(n, I32)  # n is in [-150, 128] after the clamp
        half = b.ashr(k, ir.Constant(I32, 1))
        y = b.fmul(b.fmul(y, self._pow2(half)), self._pow2(b.sub(k, half)))
        return b.select(b.fcmp_unordered("uno", x, x), x, y)  # NaN stays NaN

    def erf(self, x: ir.Value) -> ir.Value:
        b = self.b
        z = self.intrinsic("llvm.fabs", x)
        t = b.fdiv(_c(1.0), self._fmuladd(z, _c(0.5), _c(1.0)))
        exponent = b.fsub(self._horner(t, ERFC_POLY), b.fmul(z, z))
        large = b.fsub(_c(1.0), b.fmul(t, self.exp(exponent)))
        z2 = b.fmul(z, z)
        small = b.fmul(b.fmul(z, _c(2.0 / math.sqrt(math.pi))), self._horner(z2, ERF_SERIES))
        e = b.select(b.fcmp_ordered("<", z, _c(ERF_SMALL)), small, large)
        return self.intrinsic("llvm.copysign", e, x)

    def _horner(self, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
        acc: ir.Value = _c(coeffs[0])
        for c in coeffs[1:]:
            acc = self._fmuladd(acc, x, _c(c))
        return acc

    def _fmuladd(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.fmuladd", a, b, c)

    def _pow2(self, k: ir.Value) -> ir.Value:
        """2**k as a float32, for k in [-126, 127]: the exponent field (k + 127) << 23."""
        bits = self.b.shl(self.b.add(k, ir.Constant(I32, 127)), ir.Constant(I32, 23))
        return self.b.bitcast(bits, F32)


def _c(value: float) -> ir.Constant:
    return ir.Constant(F32, value)
