"""
f64 math as calls of CUDA's libdevice (`__nv_exp`, ...): PTX has f64 instructions for + - * / sqrt fma and
rounding only, and the f32 formulas of `elementwise`, `math` and `libm` are f32-accurate. The PTX paths link
the library into the kernels that call it (tinyton/lowering/ptx/libdevice.py).
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext
from tinyton.lowering.tt_to_llvm.elementwise import F64_CALLS

LIBDEVICE_F64 = {
    tt.ExpOp: "exp", tt.LogOp: "log", tt.RsqrtOp: "rsqrt", tt.Exp2Op: "exp2", tt.Log2Op: "log2",
    tt.ErfOp: "erf", tt.SinOp: "sin", tt.CosOp: "cos", tt.TanOp: "tan", tt.TanhOp: "tanh",
    tt.Log10Op: "log10", tt.Log1pOp: "log1p", tt.Expm1Op: "expm1", tt.Atan2Op: "atan2",
}  # fmt: skip
"""The libdevice function (`__nv_<name>`, its f64 variant) of each op."""


def libdevice_call(name: str):
    """A register function calling `__nv_<name>` on f64 operands (declared once per module)."""
    symbol = f"__nv_{name}"

    def call(ctx: KernelContext, *args: SSAValue) -> SSAValue:
        t = args[0].type
        if symbol not in ctx.module_ops:
            signature = llvm.LLVMFunctionType([t] * len(args), t)
            ctx.module_ops[symbol] = llvm.FuncOp(symbol, signature, linkage=llvm.LinkageAttr("external"))
        return ctx.value(llvm.CallOp(symbol, *args, return_type=t))

    return call


F64_CALLS.update({op: libdevice_call(name) for op, name in LIBDEVICE_F64.items()})
