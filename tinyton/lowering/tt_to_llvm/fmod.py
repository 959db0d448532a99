"""
C's `fmod`, exactly, for every float type: the remainder `%` of kernels (`tt.rem`) and the base of NumPy's
float `%` and `//` (`tt.mod`, `tt.floordiv`).

LLVM's `frem` is no answer: NVPTX expands it as `a - b * trunc(a / b)`, whose quotient is rounded, so the
result is off by whole multiples of an ulp of `a` once `a / b` passes 2**24 (float32 1 % 1e-30 gave
-1.8e-08 on an H200, NumPy 7.27e-31). libdevice's `__nv_fmod` is exact but an optional file that only
f64 transcendentals need. fmod's result is always representable, so an exact algorithm exists:

`__tinyton_fmod_f64`, an internal function every kernel that needs it carries (LLVM inlines it), reduces
x = |a| by multiples of y = |b| scaled by powers of two, 51 bits of the exponent gap a step:
    t = y * 2**k, k = max(e(x) - e(y) - 51, 0)    so that x / t < 2**52
    q = trunc(x / t)                              floor(x / t) or one more (rounding is monotonic and
                                                  both integers are representable)
    x = fma(-q, t, x)                             in (-t, t), a multiple of t's last bit: exact
    x = x + t where x < 0                         exact, in [0, t); the same remainder modulo y
until x < y, then takes a's sign. float32 (and float16, bfloat16) operands widen to f64 exactly, need at
most 6 steps (1 for quotients below 2**52) and narrow back exactly. NaN, an infinite `a` or a zero `b`
give NaN, an infinite `b` gives `a`, as C's.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import Float64Type, IntegerType, f64, i32
from xdsl.ir import Block, Region, SSAValue

from tinyton.lowering.tt_to_llvm.context import KernelContext
from tinyton.lowering.tt_to_llvm.emitter import Emitter

FMOD_F64 = "__tinyton_fmod_f64"
STEP_BITS = 51
"""Exponent gap reduced per step: quotients below 2**52 are exact integers in f64."""
i64 = IntegerType(64)


def fmod(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """fmod(a, b) of two registers of one float type, exactly (the helper is added to the module once)."""
    if FMOD_F64 not in ctx.module_ops:
        ctx.module_ops[FMOD_F64] = fmod_f64_function()
    wide = isinstance(a.type, Float64Type)
    a64, b64 = (x if wide else ctx.value(llvm.FPExtOp(x, f64)) for x in (a, b))
    r = ctx.value(llvm.CallOp(FMOD_F64, a64, b64, return_type=f64))
    return r if wide else ctx.value(llvm.FPTruncOp(r, a.type))


def fmod_f64_function() -> llvm.FuncOp:
    """`double __tinyton_fmod_f64(double a, double b)`: the loop of the module docstring."""
    fn = llvm.FuncOp(FMOD_F64, llvm.LLVMFunctionType([f64, f64], f64), linkage=llvm.LinkageAttr("internal"),
                     body=Region(Block(arg_types=[f64, f64])))
    em = Emitter(fn)
    a, b = fn.body.block.args
    x, y = em.value(llvm.FAbsOp(a, f64)), em.value(llvm.FAbsOp(b, f64))
    inf = em.const(float("inf"), f64)
    invalid = em.value(llvm.OrOp(_fcmp(em, "oeq", y, em.const(0.0, f64)), _fcmp(em, "oeq", x, inf)))
    x = em.select(invalid, em.const(0.0, f64), x)  # no step runs: x < y
    y = em.select(invalid, inf, y)
    y_exponent = _exponent(em, y)
    header = em.new_block([f64])
    em.insert(llvm.BrOp(header, x))
    em.move_to(header)
    (x,) = header.args
    body, done = em.new_block(), em.new_block([f64])
    em.insert(llvm.CondBrOp(_fcmp(em, "oge", x, y), body, [], done, [x]))

    em.move_to(body)
    gap = em.int_op("sub", em.int_op("sub", _exponent(em, x), y_exponent), em.const(STEP_BITS))
    k = em.select(em.icmp("sgt", gap, em.const(0)), gap, em.const(0))
    half = em.int_op("lshr", k, em.const(1))
    t = _times_power_of_two(em, _times_power_of_two(em, y, half), em.int_op("sub", k, half))
    q = em.value(llvm.CallIntrinsicOp("llvm.trunc.f64", [em.value(llvm.FDivOp(x, t))], [f64]))
    r = em.value(llvm.FMAOp(em.value(llvm.FNegOp(q)), t, x))
    r = em.select(_fcmp(em, "olt", r, em.const(0.0, f64)), em.value(llvm.FAddOp(r, t)), r)
    em.insert(llvm.BrOp(header, r))

    em.move_to(done)
    out = em.value(llvm.CallIntrinsicOp("llvm.copysign.f64", [done.args[0], a], [f64]))
    nan = em.value(llvm.OrOp(invalid, _fcmp(em, "uno", a, b)))
    em.insert(llvm.ReturnOp(em.select(nan, em.const(float("nan"), f64), out)))
    em.finish()
    return fn


def _fcmp(em: Emitter, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
    return em.value(llvm.FCmpOp(a, b, predicate))


def _exponent(em: Emitter, v: SSAValue) -> SSAValue:
    """floor(log2(v)) of a finite v > 0 as an i32, subnormals included (scaled by 2**64 into normals)."""
    subnormal = _fcmp(em, "olt", v, em.const(2.0**-1022, f64))
    scaled = em.select(subnormal, em.value(llvm.FMulOp(v, em.const(2.0**64, f64))), v)
    field = em.value(llvm.TruncOp(em.int_op("lshr", em.value(llvm.BitcastOp(scaled, i64)), em.const(52, i64)), i32))
    return em.int_op("sub", field, em.select(subnormal, em.const(1023 + 64), em.const(1023)))


def _times_power_of_two(em: Emitter, v: SSAValue, n: SSAValue) -> SSAValue:
    """v * 2**n for an i32 n in [0, 1023], exact where it does not overflow (a power of two's bits)."""
    bits = em.int_op("shl", em.value(llvm.ZExtOp(em.int_op("add", n, em.const(1023)), i64)), em.const(52, i64))
    return em.value(llvm.FMulOp(v, em.value(llvm.BitcastOp(bits, f64))))
