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
x * 2/pi rounds to the wrong quadrant near half-integers (r passes the polynomials' interval: 50 ulp at
2**22) and from 2**25 the first FMA is no longer exact (r grows without bound), so the approximate PTX
instructions take over there: values in [-1, 1], but not NumPy's (which reduces by Payne-Hanek, with all
the bits of 2/pi), as they were before. NaN and infinities give NaN.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import llvm
from xdsl.dialects.builtin import i32
from xdsl.ir import SSAValue

from tinyton.dialects import llvm_extra
from tinyton.lowering.tt_to_llvm.emitter import Emitter

TWO_OVER_PI = 0.6366197466850281
PI_OVER_2 = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15)
"""pi/2 as three float32s (float32's pi/2, then the float32 of each remainder)."""
REDUCTION_LIMIT = 2.0**20
"""The largest |x| the Cody-Waite reduction serves; beyond it the PTX approximations (`fallback`)."""
SIN_P = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
COS_P = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)

Fallback = Callable[[Emitter, SSAValue], SSAValue]


def _f(em: Emitter, op: type, *args: SSAValue) -> SSAValue:
    return em.value(op(*args))


def _fma(em: Emitter, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
    return em.value(llvm.FMAOp(a, b, c))


def _call(em: Emitter, name: str, *args: SSAValue) -> SSAValue:
    return em.value(llvm.CallIntrinsicOp(f"{name}.f32", list(args), [args[0].type]))


def _poly(em: Emitter, z: SSAValue, coefficients: tuple[float, ...]) -> SSAValue:
    acc = em.const(coefficients[0], z.type)
    for k in coefficients[1:]:
        acc = _fma(em, acc, z, em.const(k, z.type))
    return acc


def reduce_quadrant(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(sin(r), cos(r), q): x = r + q*pi/2 (mod 2*pi) with q in 0..3, |r| <= pi/4 (plus rounding).
    q is 0 for NaN and infinities (whose r is NaN)."""
    t = x.type
    j = _call(em, "llvm.rint", _f(em, llvm.FMulOp, x, em.const(TWO_OVER_PI, t)))
    neg_j = _f(em, llvm.FNegOp, j)
    r = x
    for part in PI_OVER_2:
        r = _fma(em, neg_j, em.const(part, t), r)
    r = em.select(_f(em, llvm.FCmpOp, j, em.const(0.0, t), "oeq"), x, r)  # keeps -0.0
    z = _f(em, llvm.FMulOp, r, r)
    # sin(r) = r + r*z*P(z): copysign gives sin(-0.0) = -0.0 (the sum would be +0.0); sin(r) has r's sign
    sin = _call(em, "llvm.copysign", _fma(em, _f(em, llvm.FMulOp, r, z), _poly(em, z, SIN_P), r), r)
    one_minus = _fma(em, z, em.const(-0.5, t), em.const(1.0, t))
    cos = _fma(em, _f(em, llvm.FMulOp, z, z), _poly(em, z, COS_P), one_minus)
    # j mod 4, exactly in floats (j may pass int32 and is NaN for NaN and inf: no fptosi of those)
    m = _fma(em, em.const(-4.0, t), _call(em, "llvm.trunc", _f(em, llvm.FMulOp, j, em.const(0.25, t))), j)
    m = em.select(_f(em, llvm.FCmpOp, m, m, "uno"), em.const(0.0, t), m)
    q = em.int_op("and", em.value(llvm_extra.FPToSIOp(m, i32)), em.const(3))
    return sin, cos, q


def _quadrant_value(em: Emitter, sin: SSAValue, cos: SSAValue, q: SSAValue) -> SSAValue:
    """sin(r + q*pi/2): sin, cos, -sin, -cos."""
    v = em.select(em.icmp("ne", em.int_op("and", q, em.const(1)), em.const(0)), cos, sin)
    negate = em.icmp("ne", em.int_op("and", q, em.const(2)), em.const(0))
    return em.select(negate, _f(em, llvm.FNegOp, v), v)


def _beyond(em: Emitter, x: SSAValue, accurate: SSAValue, fallback: Fallback | None) -> SSAValue:
    """`accurate` up to REDUCTION_LIMIT, `fallback(x)` beyond (None: `accurate` everywhere, for tests)."""
    if fallback is None:
        return accurate
    far = _f(em, llvm.FCmpOp, em.value(llvm.FAbsOp(x, x.type)), em.const(REDUCTION_LIMIT, x.type), "ugt")
    return em.select(far, fallback(em, x), accurate)


def _approx(name: str) -> Fallback:
    return lambda em, x: em.value(llvm.CallIntrinsicOp(f"llvm.nvvm.{name}.approx.f", [x], [x.type]))


def sin_f32(em: Emitter, x: SSAValue, fallback: Fallback | None = _approx("sin")) -> SSAValue:
    sin, cos, q = reduce_quadrant(em, x)
    return _beyond(em, x, _quadrant_value(em, sin, cos, q), fallback)


def cos_f32(em: Emitter, x: SSAValue, fallback: Fallback | None = _approx("cos")) -> SSAValue:
    """cos(x) = sin(x + pi/2): one quadrant on."""
    sin, cos, q = reduce_quadrant(em, x)
    return _beyond(em, x, _quadrant_value(em, sin, cos, em.int_op("add", q, em.const(1))), fallback)


def _approx_tan(em: Emitter, x: SSAValue) -> SSAValue:
    return _f(em, llvm.FDivOp, _approx("sin")(em, x), _approx("cos")(em, x))


def tan_f32(em: Emitter, x: SSAValue, fallback: Fallback | None = _approx_tan) -> SSAValue:
    """sin(r)/cos(r) in even quadrants, -cos(r)/sin(r) in odd ones."""
    sin, cos, q = reduce_quadrant(em, x)
    odd = em.icmp("ne", em.int_op("and", q, em.const(1)), em.const(0))
    num = em.select(odd, _f(em, llvm.FNegOp, cos), sin)
    den = em.select(odd, sin, cos)
    return _beyond(em, x, _f(em, llvm.FDivOp, num, den), fallback)
