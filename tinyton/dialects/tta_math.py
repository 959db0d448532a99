"""The NumPy ufuncs of the `tta` dialect beyond `tta_elementwise`'s arithmetic: transcendental functions,
rounding, and the float binaries `copysign`, `atan2`, `hypot`, `fmax`, `fmin`.

Each is an op of the generic `UnaryOp`/`BinaryOp` kinds (so fusion takes it like any elementwise op) and
lowers to the `tt` op of the same name (tinyton/lowering/fusion/region.py). Float operands only: the tracer
converts ints and bools first, as NumPy's loops do (`np.sin` of int32 is float64, of bools float16).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.irdl import irdl_op_definition

from tinyton.dialects.tt_types import FLOAT
from tinyton.dialects.tta_elementwise import BinaryOp, UnaryOp


class FloatBinaryOp(BinaryOp):
    """A binary op of floats."""

    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


@irdl_op_definition
class TanhOp(UnaryOp):
    """Hyperbolic tangent."""

    name = "tta.tanh"


@irdl_op_definition
class SinOp(UnaryOp):
    """Sine (radians)."""

    name = "tta.sin"


@irdl_op_definition
class CosOp(UnaryOp):
    """Cosine (radians)."""

    name = "tta.cos"


@irdl_op_definition
class TanOp(UnaryOp):
    """Tangent (radians)."""

    name = "tta.tan"


@irdl_op_definition
class Exp2Op(UnaryOp):
    """2**x."""

    name = "tta.exp2"


@irdl_op_definition
class Log2Op(UnaryOp):
    """Base-2 logarithm."""

    name = "tta.log2"


@irdl_op_definition
class Log10Op(UnaryOp):
    """Base-10 logarithm."""

    name = "tta.log10"


@irdl_op_definition
class Log1pOp(UnaryOp):
    """log(1 + x), accurate for small x."""

    name = "tta.log1p"


@irdl_op_definition
class Expm1Op(UnaryOp):
    """exp(x) - 1, accurate for small x."""

    name = "tta.expm1"


@irdl_op_definition
class ErfOp(UnaryOp):
    """The error function."""

    name = "tta.erf"


@irdl_op_definition
class FloorOp(UnaryOp):
    """Round toward minus infinity."""

    name = "tta.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """Round toward plus infinity."""

    name = "tta.ceil"


@irdl_op_definition
class TruncOp(UnaryOp):
    """Round toward zero."""

    name = "tta.trunc"


@irdl_op_definition
class RintOp(UnaryOp):
    """Round to the nearest integer, ties to even."""

    name = "tta.rint"


@irdl_op_definition
class CopysignOp(FloatBinaryOp):
    """|lhs| with the sign of rhs."""

    name = "tta.copysign"


@irdl_op_definition
class Atan2Op(FloatBinaryOp):
    """The angle of the point (rhs, lhs), in [-pi, pi]."""

    name = "tta.atan2"


@irdl_op_definition
class HypotOp(FloatBinaryOp):
    """sqrt(lhs**2 + rhs**2) without intermediate overflow."""

    name = "tta.hypot"


@irdl_op_definition
class FmaxOp(FloatBinaryOp):
    """Maximum ignoring NaN (NaN where both are)."""

    name = "tta.fmax"


@irdl_op_definition
class FminOp(FloatBinaryOp):
    """Minimum ignoring NaN (NaN where both are)."""

    name = "tta.fmin"


MATH_UNARY = (
    TanhOp, SinOp, CosOp, TanOp, Exp2Op, Log2Op, Log10Op, Log1pOp, Expm1Op, ErfOp, FloorOp, CeilOp, TruncOp, RintOp,
)
MATH_BINARY = (CopysignOp, Atan2Op, HypotOp, FmaxOp, FminOp)
MATH_OPS = (*MATH_UNARY, *MATH_BINARY)
