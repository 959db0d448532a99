"""
`tt.assert`: a thread whose registers of the condition hold a false element executes `trap`, which
aborts the kernel (the launch then fails with an error, as a failed `device_assert` does in Triton).
"""

from __future__ import annotations

from xdsl.dialects import llvm

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers
from tinyton.lowering.tt_to_llvm.memory import _inline_asm


@lowers(tt.AssertOp)
def lower_assert(ctx: KernelContext, op: tt.AssertOp) -> None:
    layout = ctx.assign.layout.get(op.condition)
    failed = None
    for ok in dict.fromkeys(ctx.get(op.condition, layout)):
        bad = ctx.value(llvm.XOrOp(ok, ctx.const(1, ok.type)))
        failed = bad if failed is None else ctx.value(llvm.OrOp(failed, bad))
    assert failed is not None
    _inline_asm(ctx, ["@$0 trap;"], [], [("b", failed)], None)
