"""`a ** b` of integer arrays in tt ops: square-and-multiply over the bits of the exponent.

NumPy refuses negative integer exponents (a ValueError when it meets one); a compiled program cannot raise,
so there the result is the integer part of 1 / a**|b|: 1 for a base of 1, +-1 for -1 (by the parity of b),
else 0. Products wrap like NumPy's.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerType, Signedness
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type
from tinyton.lowering.fusion.emitter import Emitter


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
