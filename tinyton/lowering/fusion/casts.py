"""`x.astype(dtype)` of an array program with NumPy's results where `tt.cast` has Triton's.

`tt.cast` to float8 saturates (PTX `cvt.rn.satfinite`, Triton's conversion, which kernels keep); ml_dtypes'
NumPy rounds a value past the largest finite one to NaN for e4m3fn, which has no infinity, and to ±inf for e5m2,
both signed as the value (-1e9 is e4m3fn's 0xFF NaN), and converts infinities likewise. The threshold is where
rounding to nearest even leaves the finite range: above 464 for e4m3fn (448 is the largest finite value, 480 the
NaN code), from 61440 for e5m2 (between 57344 and 65536, a tie that goes to the even 65536, infinity).
"""

from __future__ import annotations

from xdsl.dialects.builtin import Float8E4M3FNType, Float8E5M2Type, i8
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.emitter import Emitter, f32

PAST_FINITE = {Float8E4M3FNType(): ("gt", 464.0, (0x7F, -1)), Float8E5M2Type(): ("ge", 61440.0, (0x7C, -4))}
"""Per float8 type, the comparison and magnitude past which NumPy's conversion leaves the finite range, and what
it gives there, signed as the value, as i8 bits: e4m3fn's NaN (0x7F, 0xFF), e5m2's infinity (0x7C, 0xFC)."""


def numpy_cast(em: Emitter, value: SSAValue, element: Attribute) -> SSAValue:
    """`value` converted to `element` as NumPy (with ml_dtypes) converts it."""
    out = em.cast(value, element)
    if element not in PAST_FINITE or element_type(value.type) == element:
        return out
    predicate, limit, bits = PAST_FINITE[element]
    x = em.cast(value, f32)
    shape = tuple(shape_of(value.type))
    past = em.cmp(predicate, em.emit(tt.AbsOp(x)), em.const(limit, f32, shape))
    plus, minus = (em.emit(tt.BitcastOp(em.const(b, i8, shape), element)) for b in bits)
    return em.select(past, em.select(em.cmp("lt", x, em.const(0.0, f32, shape)), minus, plus), out)
