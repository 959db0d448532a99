"""
The `tl.math` ops (`tt_math`) and `tt.bitcast`, register by register.

Rows join the unary and binary tables of `elementwise`, so they share its f16-in-f32 rule and its
lowering functions (`random` adds `tt.sin`, `tt.cos` and `tt.umulhi` the same way). Transcendentals use
the approximate PTX instructions (as `tt.exp`): `ex2.approx`, `lg2.approx`; `erf` is its
Maclaurin series below |x| = 1 (12 terms: a few ulp, relative, down to subnormals) and the Abramowitz-Stegun
7.1.26 rational approximation above (absolute error below 1.5e-7 in exact arithmetic, where erf > 0.84);
`tt.div_rn`/`tt.sqrt_rn` are LLVM's `fdiv`/`sqrt`, which NVPTX emits as `div.rn`/`sqrt.rn`.
"""

from __future__ import annotations

from math import factorial, pi, sqrt

from xdsl.dialects import llvm, scf
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, llvm_type, lowers_tile
from tinyton.lowering.tt_to_llvm.elementwise import (
    BINARY,
    F64_NATIVE,
    UNARY,
    _in_f32,
    _intrinsic,
    _is_bf16,
    _llvm,
    exp2,
    exp2_nan_kept,
    lower_binary,
    lower_unary,
    map_registers,
)
from tinyton.lowering.tt_to_llvm.formulas import Formulas
from tinyton.lowering.tt_to_llvm.layouts import Layout

ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
ERF_SERIES = tuple(2 / sqrt(pi) * (-1) ** n / (factorial(n) * (2 * n + 1)) for n in range(12))
"""erf(x) = x * sum(c_n x^2n): the terms left out are below 1.1e-9 for |x| < 1. The rational form's absolute
error was 2.5e-7 at erf(6.2e-5) = 6.2e-5 on an H200 (0.4 %, found by the fuzzer)."""


def _erf(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """x * series(x^2) for |x| < 1, else sign(x) * (1 - t * poly(t) * exp(-x*x)), t = 1 / (1 + p|x|)."""
    t_ = x.type

    def f(op: type, *args: SSAValue) -> SSAValue:
        return ctx.value(op(*args))

    small = f(llvm.FMulOp, x, Formulas(ctx, x).poly(f(llvm.FMulOp, x, x), ERF_SERIES[::-1]))
    ax = ctx.value(llvm.FAbsOp(x, t_))
    t = f(llvm.FDivOp, ctx.const(1.0, t_), f(llvm.FAddOp, ctx.const(1.0, t_), f(llvm.FMulOp, ax, ctx.const(ERF_P, t_))))
    poly = ctx.const(ERF_A[-1], t_)
    for a in reversed(ERF_A[:-1]):
        poly = ctx.value(llvm.FMAOp(poly, t, ctx.const(a, t_)))
    e = UNARY[tt.ExpOp][1](ctx, ctx.value(llvm.FNegOp(f(llvm.FMulOp, x, x))))
    y = f(llvm.FSubOp, ctx.const(1.0, t_), f(llvm.FMulOp, f(llvm.FMulOp, t, poly), e))
    large = ctx.select(ctx.value(llvm.FCmpOp(x, ctx.const(0.0, t_), "olt")), ctx.value(llvm.FNegOp(y)), y)
    return ctx.select(ctx.value(llvm.FCmpOp(ax, ctx.const(1.0, t_), "olt")), small, large)


ORDER_BLIND = (
    tt.AddOp, tt.SubOp, tt.MulOp, tt.DivOp, tt.NegOp, tt.FmaOp, tt.CastOp, tt.Exp2Op, tt.Log2Op, tt.ReduceSumOp,
    tt.DotOp, tt.DotWaitOp, tt.BroadcastOp, tt.SplatOp, tt.ExpandDimsOp, tt.ReshapeOp, tt.TransOp, tt.StoreOp,
    tt.SelectOp, tt.DescriptorStoreOp, tt.DescriptorReduceOp,
)
"""Ops whose results a NaN operand makes NaN (or that store it, or add it: `tt.descriptor_reduce` has no kind but
"add") without asking whether a value is ordered: what
`exp2`'s result may flow through without its NaN guard (`_order_blind`; a select's float operands are its data,
never its condition)."""


def _order_blind(value: SSAValue) -> bool:
    """Whether nothing computed from `value` is compared, maxed, or read by an op outside `ORDER_BLIND`: following
    uses through those ops and through loop-carried values (a loop's initial values, `scf.yield` to the loop's next
    iteration and results).
    Then the folds that `_nan_kept` hides from ptxas have nothing to fold: attention's `p = exp2(s - m)` and its
    `alpha` feed only sums, products and dots (two selects an element in the softmax of the flash kernel)."""
    seen: set[SSAValue] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        for use in v.uses:
            user = use.operation
            if isinstance(user, scf.YieldOp):
                parent = user.parent_op()
                if not isinstance(parent, (scf.ForOp, scf.IfOp)):
                    return False
                todo.append(parent.results[use.index])
                if isinstance(parent, scf.ForOp):
                    todo.append(parent.body.block.args[1 + use.index])
            elif isinstance(user, scf.ForOp) and use.index >= 3:  # an initial value of a loop-carried one
                carried = use.index - 3
                todo += [user.results[carried], user.body.block.args[1 + carried]]
            elif isinstance(user, ORDER_BLIND):
                todo.extend(user.results)
            else:
                return False
    return True


@lowers_tile(tt.Exp2Op)
def lower_exp2(ctx: KernelContext, op: tt.Exp2Op, layout: Layout | None) -> list[SSAValue]:
    """`ex2.approx` of f32, NaN kept by a select (`exp2_nan_kept`) unless no comparison reads what it computes."""
    if tt.element_type(op.result.type) != f32 or not _order_blind(op.result):
        return lower_unary(ctx, op, layout)
    return map_registers(ctx, exp2, ctx.get(op.input, layout))


MATH_UNARY = {
    tt.Exp2Op: (None, exp2_nan_kept),
    tt.Log2Op: (None, _intrinsic("llvm.nvvm.lg2.approx.f")),
    tt.FloorOp: (None, _intrinsic("llvm.floor")),
    tt.CeilOp: (None, _intrinsic("llvm.ceil")),
    tt.ErfOp: (None, _erf),
    tt.SqrtRnOp: (None, lambda ctx, x: ctx.value(llvm.FSqrtOp(x))),
}
MATH_BINARY = {tt.DivRnOp: (None, _llvm(llvm.FDivOp))}
UNARY.update(MATH_UNARY)
F64_NATIVE.update({tt.FloorOp, tt.CeilOp, tt.SqrtRnOp})
BINARY.update(MATH_BINARY)
lowers_tile(*(op for op in MATH_UNARY if op is not tt.Exp2Op))(lower_unary)
lowers_tile(*MATH_BINARY)(lower_binary)


@lowers_tile(tt.FmaOp)
def lower_fma(ctx: KernelContext, op: tt.FmaOp, layout: Layout | None) -> list[SSAValue]:
    fma = lambda c, a, b, d: c.value(llvm.FMAOp(a, b, d))
    if _is_bf16(op.result.type):
        fma = _in_f32(fma)
    return map_registers(ctx, fma, *(ctx.get(v, layout) for v in (op.a, op.b, op.c)))


@lowers_tile(tt.BitcastOp)
def lower_bitcast(ctx: KernelContext, op: tt.BitcastOp, layout: Layout | None) -> list[SSAValue]:
    to = llvm_type(op.result.type)
    return map_registers(ctx, lambda c, x: c.value(llvm.BitcastOp(x, to)), ctx.get(op.input, layout))
