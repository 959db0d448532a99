"""Float formulas on LLVM registers of one type (`Formulas`): the arithmetic the libm, trig and erf
lowerings spell their polynomials and selects with."""

from __future__ import annotations

from math import log, log2

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from tinyton.lowering.tt_to_llvm.elementwise import _intrinsic, exp2_nan_kept
from tinyton.lowering.tt_to_llvm.emitter import Emitter


class Formulas:
    """Float arithmetic on one register type, spelled as formulas."""

    def __init__(self, ctx: Emitter, like: SSAValue):
        self.ctx, self.t = ctx, like.type

    def c(self, v: float) -> SSAValue:
        return self.ctx.const(v, self.t)

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FAddOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FSubOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FMulOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FDivOp(a, b))

    def quotient(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """f32 `a / b` within an ulp for a finite, normal `b`: `rcp.approx` and one Newton step, without the
        range checks and slow path of `div.rn` (~4 instructions, not ~10 and a branch), for a formula's inner
        division (tanh's `2 / (exp(2|x|) + 1)`); an op's own `/` stays correctly rounded."""
        r = self.call("llvm.nvvm.rcp.approx.ftz.f", b)
        q = self.mul(a, r)
        return self.fma(self.fma(self.ctx.value(llvm.FNegOp(b)), q, a), r, q)

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FMAOp(a, b, c))

    def abs(self, x: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FAbsOp(x, self.t))

    def cmp(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.ctx.value(llvm.FCmpOp(a, b, predicate))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.ctx.select(cond, a, b)

    def poly(self, x: SSAValue, coefficients: tuple[float, ...]) -> SSAValue:
        """Horner: coefficients from the highest power down."""
        acc = self.c(coefficients[0])
        for k in coefficients[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def exp(self, x: SSAValue) -> SSAValue:
        return exp2_nan_kept(self.ctx, self.mul(x, self.c(log2(2.718281828459045))))

    def log(self, x: SSAValue) -> SSAValue:
        return self.mul(_intrinsic("llvm.nvvm.lg2.approx.f")(self.ctx, x), self.c(log(2.0)))

    def call(self, intrinsic: str, *args: SSAValue) -> SSAValue:
        """`intrinsic.<type>` (`llvm.rint`), or `intrinsic` itself for an NVVM one (`llvm.nvvm.sin.approx.f`)."""
        return _intrinsic(intrinsic)(self.ctx, *args)

    def copysign(self, magnitude: SSAValue, sign: SSAValue) -> SSAValue:
        return self.call("llvm.copysign", magnitude, sign)

    def sign_bit(self, x: SSAValue) -> SSAValue:
        bits = IntegerType(self.t.bitwidth)
        return self.ctx.icmp("slt", self.ctx.value(llvm.BitcastOp(x, bits)), self.ctx.const(0, bits))
