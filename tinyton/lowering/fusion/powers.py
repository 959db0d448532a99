"""`a ** b` of arrays in tt ops, with NumPy's results.

Floats: exp(b log|a|) in f64 (libdevice's on the GPU), then C's special cases (`power`). Integers: square-and-multiply over the bits of the
exponent (`int_power`). NumPy refuses negative integer exponents (a ValueError when it meets one); a compiled
program cannot raise, so there the result is the integer part of 1 / a**|b|: 1 for a base of 1, +-1 for -1
(by the parity of b), else 0. Products wrap like NumPy's.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerType, Signedness, f64
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.lowering.fusion.emitter import Emitter, f32


def power(em: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    """`a ** b` with C's (NumPy's) results (integers: `int_power`): exp(b log|a|) in f64, the rest in f32 (f64 in f64);
    a negative base (or -0.0) keeps its sign for odd integral exponents and gives NaN for finite
    non-integral ones (but not for an infinite base or exponent, or -0.0); pow(x, 0), pow(1, y) and
    pow(-1, +-inf) are 1."""
    el = element_type(a.type)
    if not is_float(el):
        return int_power(em, a, b)
    wide = el if el.bitwidth > 32 else f32  # f64 stays f64
    a, b = em.cast(a, wide), em.cast(b, wide)
    c = lambda v: em.const(v, wide)  # noqa: E731
    or_ = lambda x, y: em.binary(tt.OrOp, x, y)  # noqa: E731
    # |a| ** b = exp(b log|a|) in f64: an f32 log errs by ~2**-22 absolutely on the GPU (`lg2.approx`), which
    # b multiplies (1.000876 ** 10000 was 6448.4 for NumPy's 6445.6: GPU fuzz seed 20261205 case 2947)
    a64, b64 = em.cast(a, f64), em.cast(b, f64)
    mag = em.emit(tt.ExpOp(em.binary(tt.MulOp, b64, em.emit(tt.LogOp(em.emit(tt.AbsOp(a64)))))))
    mag = em.cast(mag, wide)
    b_inf = em.cmp("eq", em.emit(tt.AbsOp(b)), c(float("inf")))
    odd = em.cmp("eq", em.binary(tt.ModOp, b, c(2.0)), c(1.0))  # floor mod: false for inf and NaN
    defined = or_(em.cmp("eq", em.binary(tt.ModOp, b, c(1.0)), c(0.0)), b_inf)
    defined = or_(defined, or_(em.cmp("eq", a, c(float("-inf"))), em.cmp("eq", a, c(0.0))))
    signed = em.select(odd, em.emit(tt.NegOp(mag)), mag)
    neg = em.select(defined, signed, em.to_shape(c(float("nan")), shape_of(signed.type)))
    minus_zero = em.and_(em.cmp("eq", a, c(0.0)), em.cmp("lt", em.binary(tt.DivOp, c(1.0), a), c(0.0)))
    out = em.select(or_(em.cmp("lt", a, c(0.0)), minus_zero), neg, mag)
    one = or_(em.cmp("eq", b, c(0.0)), em.cmp("eq", a, c(1.0)))
    one = or_(one, em.and_(em.cmp("eq", a, c(-1.0)), b_inf))
    return em.cast(em.select(one, c(1.0), out), el)


def int_power(em: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    """`a ** b` for integer tiles of one type (unrolled: one step per bit the exponent can have)."""
    el = element_type(a.type)
    assert isinstance(el, IntegerType)
    signed = el.signedness.data != Signedness.UNSIGNED
    one, zero = em.const(1, el), em.const(0, el)
    result, base, e = one, a, b
    for step in range(el.bitwidth - 1 if signed else el.bitwidth):
        bit = em.cmp("ne", em.binary(tt.AndOp, e, one), zero)
        result = em.select(bit, em.binary(tt.MulOp, result, base), result)
        if step < el.bitwidth - 2 + (not signed):
            base = em.binary(tt.MulOp, base, base)
            e = em.binary(tt.ShrOp, e, one)
    if not signed:
        return result
    odd = em.cmp("ne", em.binary(tt.AndOp, b, one), zero)
    minus_one = em.const(-1, el)
    of_minus_one = em.select(odd, minus_one, one)
    negative = em.select(em.cmp("eq", a, one), one, em.select(em.cmp("eq", a, minus_one), of_minus_one, zero))
    return em.select(em.cmp("lt", b, zero), negative, result)
