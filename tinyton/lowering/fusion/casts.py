"""`x.astype(dtype)` of an array program with NumPy's results where `tt.cast` has Triton's.

`tt.cast` to float8 saturates (PTX `cvt.rn.satfinite`, Triton's conversion, which kernels keep); ml_dtypes'
NumPy rounds a value past the largest finite one to NaN for e4m3fn, which has no infinity, and to ±inf for e5m2,
and converts infinities likewise. The threshold is where rounding to nearest even leaves the finite range: above
464 for e4m3fn (448 is the largest finite value, 480 the NaN code), from 61440 for e5m2 (between 57344 and
65536, a tie that goes to the even 65536, infinity).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import Float8E4M3FNType, Float8E5M2Type, i8
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.emitter import Emitter, f32

E4M3_ROUNDS_TO_NAN_ABOVE = 464.0
E5M2_ROUNDS_TO_INF_FROM = 61440.0
E5M2_INF_BITS = (0x7C, -4)
"""+inf and -inf of e5m2 as signed i8 bits (0x7C, 0xFC)."""


def numpy_cast(em: Emitter, value: SSAValue, element: Attribute) -> SSAValue:
    """`value` converted to `element` as NumPy (with ml_dtypes) converts it."""
    out = em.cast(value, element)
    if not isinstance(element, (Float8E4M3FNType, Float8E5M2Type)) or element_type(value.type) == element:
        return out
    x = em.cast(value, f32)
    magnitude = em.emit(tt.AbsOp(x))
    shape = tuple(shape_of(value.type))
    if isinstance(element, Float8E4M3FNType):
        past = em.cmp("gt", magnitude, em.const(E4M3_ROUNDS_TO_NAN_ABOVE, f32, shape))
        return em.select(past, em.cast(em.const(math.nan, f32, shape), element), out)
    past = em.cmp("ge", magnitude, em.const(E5M2_ROUNDS_TO_INF_FROM, f32, shape))
    plus, minus = (em.emit(tt.BitcastOp(em.const(bits, i8, shape), element)) for bits in E5M2_INF_BITS)
    infinity = em.select(em.cmp("lt", x, em.const(0.0, f32, shape)), minus, plus)
    return em.select(past, infinity, out)
