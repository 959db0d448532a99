"""
`tt.umulhi` (a widening multiply; NVPTX selects `mul.hi.u32`), `tt.cos` and `tt.sin` (f32 to a few ulp by
`trig`'s reduction and polynomials: randn's Box-Muller and NumPy's sin/cos), registered with the elementwise
lowerings.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers_tile
from tinyton.lowering.tt_to_llvm.elementwise import (
    BINARY,
    UNARY,
    lower_binary,
    lower_unary,
)
from tinyton.lowering.tt_to_llvm.trig import cos_f32, sin_f32


def _umulhi(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    width = a.type.bitwidth
    wide = IntegerType(2 * width)
    product = ctx.value(llvm.MulOp(ctx.value(llvm.ZExtOp(a, wide)), ctx.value(llvm.ZExtOp(b, wide))))
    return ctx.value(llvm.TruncOp(ctx.value(llvm.LShrOp(product, ctx.const(width, wide))), a.type))


BINARY[tt.UmulhiOp] = (_umulhi, None)
UNARY[tt.CosOp] = (None, cos_f32)
UNARY[tt.SinOp] = (None, sin_f32)
lowers_tile(tt.UmulhiOp)(lower_binary)
lowers_tile(tt.CosOp, tt.SinOp)(lower_unary)
