"""
The C math library ops (`tt_libm`), register by register.

f32 formulas from Cephes (the polynomials of `tanhf`, `atanf`) on top of the approximate PTX instructions
(`ex2.approx`, `lg2.approx`), each with a branch-free select where the plain formula loses accuracy:
`log1p` and `expm1` use series near 0 (where `log(1 + x)` and `exp(x) - 1` cancel), `tanh` a polynomial
below 0.625. `tan` is `trig`'s ratio of reduced sin and cos (a few ulp; `sin.approx / cos.approx` was off
by 3e-7 near 0.06). `hypot` scales by the larger magnitude (no overflow; f64 too), `atan2` reduces to
[0, tan(pi/8)] and restores the octant from the signs (IEEE's zeros and infinities), `trunc`, `rint`,
`copysign`, `fmax`, `fmin` are LLVM intrinsics (`cvt.rzi`, `cvt.rni`, `copysign`, `max`/`min`, which ignore
NaN as C's `fmax` does), native for f64. f16 and bf16 compute in f32 and round back; f64 calls
libdevice where the formula is f32's (`libdevice`).
"""

from __future__ import annotations

from math import pi

from xdsl.dialects import llvm
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float64Type
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers_tile
from tinyton.lowering.tt_to_llvm.elementwise import (
    BINARY,
    F64_CALLS,
    F64_NATIVE,
    UNARY,
    _in_f32,
    _intrinsic,
    lower_unary,
    map_registers,
)
from tinyton.lowering.tt_to_llvm.fmod import fmod
from tinyton.lowering.tt_to_llvm.formulas import Formulas
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.trig import tan_f32

TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
ATAN_P = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)


def _tanh(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """Cephes tanhf: x + x**3 P(x**2) below |x| = 0.625, else sign(x) (1 - 2 / (exp(2|x|) + 1)), |x| taken as
    at most 10 there (tanh(10) rounds to 1.0, and exp stays finite for the quotient's Newton step; NaN stays)."""
    m = Formulas(ctx, x)
    z = m.mul(x, x)
    small = m.fma(m.mul(m.poly(z, TANH_P), z), x, x)
    ax = m.abs(x)
    e = m.exp(m.mul(m.select(m.cmp("ogt", ax, m.c(10.0)), m.c(10.0), ax), m.c(2.0)))
    large = m.copysign(m.sub(m.c(1.0), m.quotient(m.c(2.0), m.add(e, m.c(1.0)))), x)
    return m.select(m.cmp("olt", ax, m.c(0.625)), small, large)


def _log10(ctx: KernelContext, x: SSAValue) -> SSAValue:
    m = Formulas(ctx, x)
    return m.mul(_intrinsic("llvm.nvvm.lg2.approx.f")(ctx, x), m.c(0.30102999566398120))


def _log1p(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """Below |x| = 0.5: 2 atanh(s), s = x / (2 + x) (|s| <= 1/3), as a series in s**2; else log(1 + x)."""
    m = Formulas(ctx, x)
    s = m.div(x, m.add(m.c(2.0), x))
    s2 = m.mul(s, s)
    series = m.poly(s2, tuple(1.0 / k for k in (15, 13, 11, 9, 7, 5, 3, 1)))
    small = m.mul(m.mul(m.c(2.0), s), series)
    return m.select(m.cmp("olt", m.abs(x), m.c(0.5)), small, m.log(m.add(m.c(1.0), x)))


def _expm1(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """Below |x| = 0.5: the Taylor series to x**10 / 10!; else exp(x) - 1."""
    m = Formulas(ctx, x)
    factorials = [1.0]
    for k in range(1, 11):
        factorials.append(factorials[-1] * k)
    series = m.mul(m.poly(x, tuple(1.0 / factorials[k] for k in range(10, 0, -1))), x)
    return m.select(m.cmp("olt", m.abs(x), m.c(0.5)), series, m.sub(m.exp(x), m.c(1.0)))


def _atan2(ctx: KernelContext, y: SSAValue, x: SSAValue) -> SSAValue:
    """atan(min/max) by Cephes' atanf on [0, tan(pi/8)] (above it atan(a) = pi/4 + atan((a-1)/(a+1))), then
    the octant: pi/2 - r where |y| > |x|, pi - r where x is negative (-0.0 too), the sign of y (C99 Annex F)."""
    m = Formulas(ctx, y)
    ax, ay = m.abs(x), m.abs(y)
    hi = m.select(m.cmp("ogt", ay, ax), ay, ax)
    lo = m.select(m.cmp("ogt", ay, ax), ax, ay)
    a = m.div(lo, hi)
    a = m.select(m.cmp("oeq", hi, m.c(0.0)), m.c(0.0), a)  # atan2(+-0, +-0)
    a = m.select(m.cmp("oeq", lo, m.c(float("inf"))), m.c(1.0), a)  # both infinite
    reduce = m.cmp("ogt", a, m.c(0.41421356237309503))
    t = m.select(reduce, m.div(m.sub(a, m.c(1.0)), m.add(a, m.c(1.0))), a)
    z = m.mul(t, t)
    r = m.fma(m.mul(m.poly(z, ATAN_P), z), t, t)
    r = m.select(reduce, m.add(r, m.c(pi / 4)), r)
    r = m.select(m.cmp("ogt", ay, ax), m.sub(m.c(pi / 2), r), r)
    r = m.select(m.sign_bit(x), m.sub(m.c(pi), r), r)
    r = m.copysign(r, y)
    return m.select(m.cmp("uno", x, y), m.add(x, y), r)


def _hypot(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """hi * sqrt(1 + (lo/hi)**2); 0 for two zeros, inf if either is infinite (even with a NaN), else NaN
    for a NaN."""
    m = Formulas(ctx, a)
    aa, ab = m.abs(a), m.abs(b)
    hi = m.select(m.cmp("ogt", ab, aa), ab, aa)
    lo = m.select(m.cmp("ogt", ab, aa), aa, ab)
    r = m.div(lo, hi)
    h = m.mul(hi, ctx.value(llvm.FSqrtOp(m.fma(r, r, m.c(1.0)))))
    h = m.select(m.cmp("oeq", hi, m.c(0.0)), m.c(0.0), h)
    h = m.select(m.cmp("uno", a, b), m.add(a, b), h)
    inf = m.c(float("inf"))
    return m.select(ctx.value(llvm.OrOp(m.cmp("oeq", aa, inf), m.cmp("oeq", ab, inf))), inf, h)


def _float_floordiv(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """NumPy's float `//` (npy_divmod): (a - fmod(a, b)) / b, one less where the remainder's sign differs
    from b's, then floored (rounded up when 0.5 below the quotient); a / b for b = 0, a signed 0 for 0."""
    m = Formulas(ctx, a)
    zero = m.c(0.0)
    mod = fmod(ctx, a, b)
    div = m.div(m.sub(a, mod), b)
    differ = ctx.value(llvm.XOrOp(m.cmp("olt", b, zero), m.cmp("olt", mod, zero)))
    div = m.select(ctx.value(llvm.AndOp(m.cmp("une", mod, zero), differ)), m.sub(div, m.c(1.0)), div)
    floor = _intrinsic("llvm.floor")(ctx, div)
    floor = m.select(m.cmp("ogt", m.sub(div, floor), m.c(0.5)), m.add(floor, m.c(1.0)), floor)
    quotient = m.div(a, b)
    floor = m.select(m.cmp("oeq", div, zero), m.copysign(zero, quotient), floor)
    return m.select(m.cmp("oeq", b, zero), quotient, floor)


BINARY[tt.FloorDivOp] = (BINARY[tt.FloorDivOp][0], _float_floordiv)

LIBM_UNARY = {
    tt.TanhOp: (None, _tanh),
    tt.TanOp: (None, tan_f32),
    tt.Log10Op: (None, _log10),
    tt.Log1pOp: (None, _log1p),
    tt.Expm1Op: (None, _expm1),
    tt.TruncOp: (None, _intrinsic("llvm.trunc")),
    tt.RintOp: (None, _intrinsic("llvm.rint")),
}
UNARY.update(LIBM_UNARY)
F64_NATIVE.update({tt.TruncOp, tt.RintOp})
lowers_tile(*LIBM_UNARY)(lower_unary)

LIBM_BINARY = {
    tt.CopysignOp: _intrinsic("llvm.copysign"),
    tt.Atan2Op: _atan2,
    tt.HypotOp: _hypot,
    tt.FmaxOp: _intrinsic("llvm.maxnum"),
    tt.FminOp: _intrinsic("llvm.minnum"),
}
F64_BINARY = {tt.CopysignOp, tt.HypotOp, tt.FmaxOp, tt.FminOp}
"""The binaries whose formula is exact enough in f64 (atan2's polynomial is f32's: f64 calls libdevice)."""


@lowers_tile(*LIBM_BINARY)
def lower_libm_binary(ctx: KernelContext, op: tt.BinaryOp, layout: Layout | None) -> list[SSAValue]:
    elem = tt.element_type(op.result.type)
    fn = LIBM_BINARY[type(op)]
    if isinstance(elem, Float64Type) and type(op) not in F64_BINARY:
        fn = F64_CALLS[type(op)]  # a libdevice call
    elif isinstance(elem, Float16Type | BFloat16Type):
        fn = _in_f32(fn)
    return map_registers(ctx, fn, ctx.get(op.lhs, layout), ctx.get(op.rhs, layout))
