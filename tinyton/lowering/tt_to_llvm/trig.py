"""
float32 `sin`, `cos` and `tan` to a few ulp (relative), as libdevice's `sinf`/`cosf`/`tanf` that Triton calls.

PTX's `sin.approx.f32`/`cos.approx.f32` have an absolute error of ~2**-21: off by 3e-7 on results near 0.1
(found by the fuzzer on an H200), and `tan` as their ratio worse. Here, in plain LLVM arithmetic (no NVVM
intrinsic, so tests JIT the same IR on the host and compare with NumPy):

- Cody-Waite reduction by pi/2: j = rint(x * 2/pi), r = x - j*P1 - j*P2 - j*P3 by three FMAs, P1 + P2 + P3
  = pi/2 to 2**-76. P1 is float32's pi/2, so j*P1 and x share the grid of 2**-23 (2**-24 below 1) and the
  first FMA is exact; the other two round relative to r. r lies in [-pi/4, pi/4] (a little beyond from
  rounding x * 2/pi) and its error stays below an ulp of r for |x| <= 2**20 (REDUCTION_LIMIT).
- Cephes' minimax polynomials for sinf and cosf on [-pi/4, pi/4] in z = r*r;
- the quadrant j mod 4 picks sin(r) or cos(r) and the sign; tan is the ratio sin(r)/cos(r) (-cos/sin in
  odd quadrants), a few ulp.

Measured against float64 NumPy on the host (tests/test_trig_accuracy.py, every float32 nearest a multiple
of pi/2 included): at most 1.8 ulp for sin and cos and 3.7 for tan up to 2**20. Beyond REDUCTION_LIMIT,
x * 2/pi would round to the wrong quadrant near half-integers, so larger arguments are reduced as NumPy's libm
does (Payne-Hanek, `_large_reduction`): x times 2/pi's bits in 24-bit chunks, each product exact in float64,
summed modulo 4 (the chunks whose products are multiples of 4 add nothing), r = the fraction times pi/2 to
~2**-45 absolute (the approximate PTX `sin.approx` there before gave cos(-4.25e37) with the wrong sign: fuzz
seed 20261203 case 5771 on an H200). NaN and infinities give NaN. The forty float64 operations of that sum
live in `__tinyton_two_over_pi_mod4`, an internal function that branches past them for |x| <= 2**20, so
kernels of ordinary arguments do not pay for them (LLVM inlines it and keeps the branch).
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import f32, f64, i32
from xdsl.ir import Block, Region, SSAValue

from tinyton.dialects import llvm_extra
from tinyton.lowering.tt_to_llvm.context import KernelContext
from tinyton.lowering.tt_to_llvm.emitter import Emitter
from tinyton.lowering.tt_to_llvm.formulas import Formulas

TWO_OVER_PI = 0.6366197466850281
PI_OVER_2_F64 = 1.5707963267948966
PI_OVER_2 = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15)
"""pi/2 as three float32s (float32's pi/2, then the float32 of each remainder)."""
REDUCTION_LIMIT = 2.0**20
"""The largest |x| the Cody-Waite reduction serves; beyond it the Payne-Hanek one (`_large_reduction`)."""
TWO_OVER_PI_BITS = "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163"
"""The first 216 bits of 2/pi after the binary point, in hex: nine 24-bit chunks, enough for every float32
(x < 2**128: the chunk products reach ~2**-88 below the fraction's last needed bit)."""
TWO_OVER_PI_CHUNKS = tuple(int(TWO_OVER_PI_BITS[i : i + 6], 16) * 2.0 ** (-4 * (i + 6)) for i in range(0, 54, 6))
TWO_OVER_PI_MOD4 = "__tinyton_two_over_pi_mod4"
SIN_P = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
COS_P = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)

def reduce_quadrant(ctx: KernelContext, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(sin(r), cos(r), q): x = r + q*pi/2 (mod 2*pi) with q in 0..3, |r| <= pi/4 (plus rounding).
    q is 0 for NaN and infinities (whose r is NaN)."""
    f = Formulas(ctx, x)
    j = f.call("llvm.rint", f.mul(x, f.c(TWO_OVER_PI)))
    neg_j = ctx.value(llvm.FNegOp(j))
    r = x
    for part in PI_OVER_2:
        r = f.fma(neg_j, f.c(part), r)
    r = f.select(f.cmp("oeq", j, f.c(0.0)), x, r)  # keeps -0.0
    m = f.fma(f.c(-4.0), f.call("llvm.trunc", f.mul(j, f.c(0.25))), j)  # j mod 4, exactly in floats
    large_r, large_m = _large_reduction(ctx, x)
    large = f.cmp("ugt", f.abs(x), f.c(REDUCTION_LIMIT))  # NaN too
    r, m = f.select(large, large_r, r), f.select(large, large_m, m)
    z = f.mul(r, r)
    # sin(r) = r + r*z*P(z): copysign gives sin(-0.0) = -0.0 (the sum would be +0.0); sin(r) has r's sign
    sin = f.copysign(f.fma(f.mul(r, z), f.poly(z, SIN_P), r), r)
    one_minus = f.fma(z, f.c(-0.5), f.c(1.0))
    cos = f.fma(f.mul(z, z), f.poly(z, COS_P), one_minus)
    # (m may be -3..3 and is NaN for NaN and inf: no fptosi of those)
    m = f.select(f.cmp("uno", m, m), f.c(0.0), m)
    q = ctx.int_op("and", ctx.value(llvm_extra.FPToSIOp(m, i32)), ctx.const(3))
    return sin, cos, q


def _large_reduction(ctx: KernelContext, x: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(r, q) with x*2/pi = q + r*2/pi (mod 4), q an integer 0..4 as a float, for |x| > REDUCTION_LIMIT
    (anything for smaller x: the caller selects the Cody-Waite reduction there)."""
    if TWO_OVER_PI_MOD4 not in ctx.module_ops:
        ctx.module_ops[TWO_OVER_PI_MOD4] = two_over_pi_mod4_function()
    total = ctx.value(llvm.CallOp(TWO_OVER_PI_MOD4, x, return_type=f64))
    d = Formulas(ctx, total)
    q = d.call("llvm.rint", total)
    r = d.mul(d.sub(total, q), d.c(PI_OVER_2_F64))
    return ctx.value(llvm.FPTruncOp(r, f32)), ctx.value(llvm.FPTruncOp(q, f32))


def two_over_pi_mod4_function() -> llvm.FuncOp:
    """`double __tinyton_two_over_pi_mod4(float x)`: x*2/pi modulo 4 for |x| > REDUCTION_LIMIT (Payne-Hanek:
    x*c exact in float64 for each 24-bit chunk c of 2/pi, taken modulo 4 exactly as p - 4*floor(p/4), summed),
    0 below it without computing it."""
    fn = llvm.FuncOp(TWO_OVER_PI_MOD4, llvm.LLVMFunctionType([f32], f64), linkage=llvm.LinkageAttr("internal"),
                     body=Region(Block(arg_types=[f32])))
    em = Emitter(fn)
    (x,) = fn.body.block.args
    f = Formulas(em, x)
    reduce, done = em.new_block(), em.new_block([f64])
    large = f.cmp("ugt", f.abs(x), f.c(REDUCTION_LIMIT))  # NaN too
    em.insert(llvm.CondBrOp(large, reduce, [], done, [em.const(0.0, f64)]))

    em.move_to(reduce)
    xd = em.value(llvm.FPExtOp(x, f64))
    d = Formulas(em, xd)

    def mod4(v: SSAValue) -> SSAValue:
        return d.fma(d.c(-4.0), d.call("llvm.floor", d.mul(v, d.c(0.25))), v)

    total = d.c(0.0)
    for chunk in TWO_OVER_PI_CHUNKS:
        total = d.add(total, mod4(d.mul(xd, d.c(chunk))))
    em.insert(llvm.BrOp(done, mod4(total)))

    em.move_to(done)
    em.insert(llvm.ReturnOp(done.args[0]))
    em.finish()
    return fn


def _quadrant_value(em: Emitter, sin: SSAValue, cos: SSAValue, q: SSAValue) -> SSAValue:
    """sin(r + q*pi/2): sin, cos, -sin, -cos."""
    v = em.select(em.icmp("ne", em.int_op("and", q, em.const(1)), em.const(0)), cos, sin)
    negate = em.icmp("ne", em.int_op("and", q, em.const(2)), em.const(0))
    return em.select(negate, em.value(llvm.FNegOp(v)), v)


def sin_f32(ctx: KernelContext, x: SSAValue) -> SSAValue:
    sin, cos, q = reduce_quadrant(ctx, x)
    return _quadrant_value(ctx, sin, cos, q)


def cos_f32(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """cos(x) = sin(x + pi/2): one quadrant on."""
    sin, cos, q = reduce_quadrant(ctx, x)
    return _quadrant_value(ctx, sin, cos, ctx.int_op("add", q, ctx.const(1)))


def tan_f32(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """sin(r)/cos(r) in even quadrants, -cos(r)/sin(r) in odd ones."""
    sin, cos, q = reduce_quadrant(ctx, x)
    odd = ctx.icmp("ne", ctx.int_op("and", q, ctx.const(1)), ctx.const(0))
    num = ctx.select(odd, ctx.value(llvm.FNegOp(cos)), sin)
    den = ctx.select(odd, sin, cos)
    return Formulas(ctx, x).div(num, den)
