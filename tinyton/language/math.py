"""Elementwise math builtins; also reachable as `tl.math.<name>`, Triton's namespace.

Int inputs of float functions become float32; f16 computes in float32 and rounds back.
"""

from __future__ import annotations

import enum
from typing import Any

from tinyton.language.core import builtin, kernel


class PropagateNan(enum.Enum):
    """Triton's NaN policy of `maximum`/`minimum`: tinyton always propagates NaN (NONE leaves it open)."""

    NONE = 0
    ALL = 1


def _unary(name: str, doc: str) -> Any:
    def fn(x: Any) -> Any:
        return kernel().unary(name, x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


exp = _unary("exp", "e**x.")
exp2 = _unary("exp2", "2**x.")
log = _unary("log", "Natural logarithm.")
log2 = _unary("log2", "Base-2 logarithm.")
sqrt = _unary("sqrt", "Square root.")
sqrt_rn = _unary("sqrt_rn", "Square root, correctly rounded (IEEE round-to-nearest).")
rsqrt = _unary("rsqrt", "1/sqrt(x), one approximate instruction on the GPU.")
sin = _unary("sin", "Sine (radians).")
cos = _unary("cos", "Cosine (radians).")
floor = _unary("floor", "Round toward minus infinity.")
ceil = _unary("ceil", "Round toward plus infinity.")
erf = _unary("erf", "The error function.")
abs = _unary("abs", "Absolute value (ints too).")
tanh = _unary("tanh", "Hyperbolic tangent.")
tan = _unary("tan", "Tangent (radians).")
log10 = _unary("log10", "Base-10 logarithm.")
log1p = _unary("log1p", "log(1 + x), accurate near 0.")
expm1 = _unary("expm1", "exp(x) - 1, accurate near 0.")
trunc = _unary("trunc", "Round toward zero.")
rint = _unary("rint", "Round to the nearest integer, ties to even.")


@builtin
def maximum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> Any:
    """Elementwise maximum with broadcasting (NaN propagates)."""
    return kernel().binary("maximum", x, y)


@builtin
def minimum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> Any:
    """Elementwise minimum with broadcasting (NaN propagates)."""
    return kernel().binary("minimum", x, y)


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = PropagateNan.NONE) -> Any:
    """`x` limited to `[min, max]`: minimum(maximum(x, min), max)."""
    return kernel().clamp(x, min, max)


@builtin
def relu(x: Any) -> Any:
    """max(x, 0)."""
    return kernel().binary("maximum", x, 0)


@builtin
def sigmoid(x: Any) -> Any:
    """1 / (1 + exp(-x))."""
    return kernel().sigmoid(x)


@builtin
def fma(x: Any, y: Any, z: Any) -> Any:
    """x * y + z with one rounding (floats; ints multiply and add)."""
    return kernel().fma(x, y, z)


@builtin
def div_rn(x: Any, y: Any) -> Any:
    """x / y for floats, correctly rounded (IEEE round-to-nearest)."""
    return kernel().div_rn(x, y)


@builtin
def umulhi(x: Any, y: Any) -> Any:
    """The high 32 bits of the unsigned 64-bit product of two 32-bit ints."""
    return kernel().umulhi(x, y)
