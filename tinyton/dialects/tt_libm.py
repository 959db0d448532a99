"""The C math library's elementwise functions beyond `tt_math` (libdevice's names), which NumPy's ufuncs and
Triton's `libdevice` module offer: hyperbolic and trigonometric functions, the accurate-near-zero `log1p`
and `expm1`, rounding (`trunc`, `rint`: to nearest, ties to even), and the float binaries `copysign`,
`atan2`, `hypot` and the NaN-ignoring `fmax`/`fmin`.

Like `tt_math`'s, each keeps its operands' type; f16 and bf16 compute in f32 and round back.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.irdl import irdl_op_definition

from tinyton.dialects.tt_elementwise import BinaryOp, UnaryOp
from tinyton.dialects.tt_types import FLOAT


@irdl_op_definition
class TanhOp(UnaryOp):
    """Hyperbolic tangent."""

    name = "tt.tanh"


@irdl_op_definition
class TanOp(UnaryOp):
    """Tangent (radians)."""

    name = "tt.tan"


@irdl_op_definition
class Log10Op(UnaryOp):
    """Base-10 logarithm."""

    name = "tt.log10"


@irdl_op_definition
class Log1pOp(UnaryOp):
    """log(1 + x), accurate for small x."""

    name = "tt.log1p"


@irdl_op_definition
class Expm1Op(UnaryOp):
    """exp(x) - 1, accurate for small x."""

    name = "tt.expm1"


@irdl_op_definition
class TruncOp(UnaryOp):
    """Round toward zero."""

    name = "tt.trunc"


@irdl_op_definition
class RintOp(UnaryOp):
    """Round to the nearest integer, ties to even."""

    name = "tt.rint"


class _FloatBinary(BinaryOp):
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


@irdl_op_definition
class CopysignOp(_FloatBinary):
    """|lhs| with the sign bit of rhs."""

    name = "tt.copysign"


@irdl_op_definition
class Atan2Op(_FloatBinary):
    """The angle of the point (rhs, lhs): atan2(y, x), in [-pi, pi]."""

    name = "tt.atan2"


@irdl_op_definition
class HypotOp(_FloatBinary):
    """sqrt(lhs**2 + rhs**2) without intermediate overflow (inf if either is infinite)."""

    name = "tt.hypot"


@irdl_op_definition
class FmaxOp(_FloatBinary):
    """Maximum ignoring NaN (NaN only where both are NaN)."""

    name = "tt.fmax"


@irdl_op_definition
class FminOp(_FloatBinary):
    """Minimum ignoring NaN (NaN only where both are NaN)."""

    name = "tt.fmin"


LIBM_UNARY = (TanhOp, TanOp, Log10Op, Log1pOp, Expm1Op, TruncOp, RintOp)
LIBM_BINARY = (CopysignOp, Atan2Op, HypotOp, FmaxOp, FminOp)
LIBM_OPS = (*LIBM_UNARY, *LIBM_BINARY)
