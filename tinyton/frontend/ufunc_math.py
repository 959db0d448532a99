"""NumPy's math ufuncs on traced arrays: exponentials, logarithms, trigonometric and hyperbolic functions,
rounding, NaN/inf tests and the float binaries (`copysign`, `arctan2`, `hypot`, `fmax`, `fmin`, `logaddexp`),
plus `sigmoid`, `erf`, `erfinv`, `rsqrt` and `round` which NumPy spells otherwise. Types resolve as in
tinyton/frontend/ufuncs.py (`np.sin` of int32 is float64, of bools float16).
"""

from __future__ import annotations

from math import log

import numpy as np
from xdsl.dialects.builtin import i1
from xdsl.ir import Operation

from tinyton.dialects import tta
from tinyton.dialects.tt import is_float
from tinyton.errors import error
from tinyton.frontend.traced import ARRAY_IMPLS, Traced
from tinyton.frontend.ufuncs import (
    Operand,
    cmp,
    emit,
    full_like,
    register,
    resolve,
    scalar,
    where,
)


def _float_unary(name: str, op: type[Operation], doc: str, *aliases: str, loop: str | None = None) -> None:
    """A ufunc that is one tta op of floats; `loop` names the NumPy ufunc whose types it takes."""

    def impl(x: Operand) -> Traced:
        (x,), _ = resolve(loop or name, [x])
        return emit(op, x)

    register(name, doc, *aliases)(impl)


_float_unary("exp", tta.ExpOp, "e**x.")
_float_unary("exp2", tta.Exp2Op, "2**x.")
_float_unary("expm1", tta.Expm1Op, "exp(x) - 1, accurate near 0.")
_float_unary("log", tta.LogOp, "Natural logarithm.")
_float_unary("log2", tta.Log2Op, "Base-2 logarithm.")
_float_unary("log10", tta.Log10Op, "Base-10 logarithm.")
_float_unary("log1p", tta.Log1pOp, "log(1 + x), accurate near 0.")
_float_unary("sqrt", tta.SqrtOp, "Square root.")
_float_unary("rsqrt", tta.RsqrtOp, "1 / sqrt(x) (not in NumPy; its types are sqrt's).", loop="sqrt")
_float_unary("sin", tta.SinOp, "Sine (radians).")
_float_unary("cos", tta.CosOp, "Cosine (radians).")
_float_unary("tan", tta.TanOp, "Tangent (radians).")
_float_unary("tanh", tta.TanhOp, "Hyperbolic tangent.")
_float_unary("erf", tta.ErfOp, "The error function (not in NumPy: scipy.special.erf; its types are exp's).", loop="exp")
_float_unary("rint", tta.RintOp, "Round to the nearest integer, ties to even.")


def _rounding(name: str, op: type[Operation], doc: str) -> None:
    """floor, ceil and trunc: of ints and bools NumPy returns them unchanged (its loops keep the type)."""

    def impl(x: Operand) -> Traced:
        (x,), _ = resolve(name, [x])
        return emit(op, x) if is_float(x.element) else x

    register(name, doc)(impl)


_rounding("floor", tta.FloorOp, "Round toward minus infinity (ints unchanged).")
_rounding("ceil", tta.CeilOp, "Round toward plus infinity (ints unchanged).")
_rounding("trunc", tta.TruncOp, "Round toward zero (ints unchanged).")


@register("round", "`np.round(x, decimals=0)`: to the nearest multiple of 10**-decimals, ties to even.", "around")
def round_(x: Operand, decimals: int = 0) -> Traced:
    if not isinstance(decimals, int):
        raise error(f"round: decimals must be a Python int, got {decimals!r}")
    if not isinstance(x, Traced):
        raise error("round needs an array")
    if x.element == i1 or is_float(x.element):
        (x,), _ = resolve("rint", [x])  # bools round as float16, as NumPy's
        if decimals == 0:
            return emit(tta.RintOp, x)
        scale = scalar(x, 10.0 ** abs(decimals))
        scaled = emit(tta.MulOp if decimals > 0 else tta.DivOp, x, scale)
        return emit(tta.DivOp if decimals > 0 else tta.MulOp, emit(tta.RintOp, scaled), scale)
    if decimals >= 0:
        return x
    return _round_int(x, 10 ** -decimals)


def _round_int(x: Traced, step: int) -> Traced:
    """An int to the nearest multiple of `step`, ties to the even multiple (NumPy's ints with decimals < 0)."""
    if step > np.iinfo(x.dtype).max:
        return full_like(x, 0)
    s = scalar(x, step)
    q = emit(tta.FloorDivOp, x, s)
    r = emit(tta.SubOp, x, emit(tta.MulOp, q, s))
    twice = emit(tta.AddOp, r, r)
    odd = cmp("ne", emit(tta.AndOp, q, scalar(x, 1)), scalar(x, 0))
    up = emit(tta.OrOp, cmp("gt", twice, s), emit(tta.AndOp, cmp("eq", twice, s), odd))
    return emit(tta.MulOp, where(up, emit(tta.AddOp, q, scalar(x, 1)), q), s)


def _nan_test(name: str, doc: str, on_float: str, on_int: bool) -> None:
    """isnan/isinf/isfinite: a comparison on floats, a constant on ints and bools."""

    def impl(x: Operand) -> Traced:
        (x,), _ = resolve(name, [x])
        if not is_float(x.element):
            return full_like(x, on_int, i1)
        if on_float == "isnan":
            return cmp("ne", x, x)
        inf = scalar(x, float("inf"))
        return cmp("eq", emit(tta.AbsOp, x), inf) if on_float == "isinf" else cmp("lt", emit(tta.AbsOp, x), inf)

    register(name, doc)(impl)


_nan_test("isnan", "True where x is NaN.", "isnan", False)
_nan_test("isinf", "True where x is +inf or -inf.", "isinf", False)
_nan_test("isfinite", "True where x is neither NaN nor infinite.", "isfinite", True)


def _float_binary(name: str, op: type[Operation], doc: str, *aliases: str, on_int: str | None = None) -> None:
    """A float binary ufunc; `on_int` names the builtin NumPy's int and bool loops amount to."""

    def impl(a: Operand, b: Operand) -> Traced:
        (x, y), _ = resolve(name, [a, b])
        if not is_float(x.element):
            assert on_int is not None
            return ARRAY_IMPLS[on_int](x, y)
        return emit(op, x, y)

    register(name, doc, *aliases)(impl)


_float_binary("fmax", tta.FmaxOp, "Elementwise maximum ignoring NaN (NaN only where both are).", on_int="maximum")
_float_binary("fmin", tta.FminOp, "Elementwise minimum ignoring NaN (NaN only where both are).", on_int="minimum")
_float_binary("copysign", tta.CopysignOp, "|a| with the sign of b.")
_float_binary("arctan2", tta.Atan2Op, "The angle of the point (b, a) in [-pi, pi] (atan2(y, x)).", "atan2")
_float_binary("hypot", tta.HypotOp, "sqrt(a**2 + b**2) without overflow; inf if either is infinite.")


@register("logaddexp", "log(exp(a) + exp(b)) without overflow.")
def logaddexp(a: Operand, b: Operand) -> Traced:
    (x, y), _ = resolve("logaddexp", [a, b])
    element = x.element
    if x.dtype.itemsize == 2:  # float16/bfloat16: in float32, rounded once (NumPy's half loops do)
        x, y = x.to(np.float32), y.to(np.float32)
    larger = emit(tta.MaximumOp, x, y)
    gap = emit(tta.NegOp, emit(tta.AbsOp, emit(tta.SubOp, x, y)))
    result = emit(tta.AddOp, larger, emit(tta.Log1pOp, emit(tta.ExpOp, gap)))
    result = where(cmp("eq", x, y), emit(tta.AddOp, x, scalar(x, log(2.0))), result)  # also inf == inf
    return result.to(element) if result.element != element else result


@register("sigmoid", "1 / (1 + exp(-x)) (scipy.special.expit; types as np.exp's).")
def sigmoid(x: Operand) -> Traced:
    (x,), _ = resolve("exp", [x])
    one = scalar(x, 1.0)
    return emit(tta.DivOp, one, emit(tta.AddOp, one, emit(tta.ExpOp, emit(tta.NegOp, x))))


ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941)
ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
               0.00943887047, 1.00167406, 2.83297682)
"""Giles' single-precision polynomials of erfinv(x) / x in `w - 2.5` (w = -log(1 - x²) < 5) and `sqrt(w) - 3`
(M. Giles, "Approximating the erfinv function", GPU Computing Gems, 2011), highest power first."""


@register("erfinv", "The inverse error function (not in NumPy: scipy.special.erfinv; its types are exp's), "
          "float32-accurate in every type (Giles' polynomials); ±1 give ±inf, |x| > 1 NaN.")
def erfinv(x: Operand) -> Traced:
    (x,), _ = resolve("exp", [x])
    element = x.element
    if x.dtype.itemsize == 2:  # float16/bfloat16: in float32, rounded once
        x = x.to(np.float32)
    one = scalar(x, 1.0)
    w = emit(tta.NegOp, emit(tta.LogOp, emit(tta.MulOp, emit(tta.SubOp, one, x), emit(tta.AddOp, one, x))))
    central, tail = emit(tta.SubOp, w, scalar(x, 2.5)), emit(tta.SubOp, emit(tta.SqrtOp, w), scalar(x, 3.0))
    near = cmp("lt", w, scalar(x, 5.0))
    t = where(near, central, tail)
    p = where(near, scalar(x, ERFINV_CENTRAL[0]), scalar(x, ERFINV_TAIL[0]))
    for a, b in zip(ERFINV_CENTRAL[1:], ERFINV_TAIL[1:]):
        p = emit(tta.AddOp, where(near, scalar(x, a), scalar(x, b)), emit(tta.MulOp, p, t))
    y = emit(tta.MulOp, p, x)
    edge = cmp("eq", emit(tta.AbsOp, x), one)
    y = where(edge, emit(tta.CopysignOp, scalar(x, np.inf), x), y)
    return y.to(element) if y.element != element else y


@register("relu", "maximum(x, 0).")
def relu(x: Operand) -> Traced:
    return ARRAY_IMPLS["maximum"](x, 0)
