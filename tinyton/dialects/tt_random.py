"""The elementwise ops `tl.rand`/`tl.randn` are built from beyond the core set: `tt.umulhi` (the high 32
bits of the unsigned product, Philox's multiply) and `tt.cos`/`tt.sin` (Box-Muller).

Branch triton-language adds the same ops (same names and semantics) with the math builtins; whichever lands
second keeps one definition.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.irdl import irdl_op_definition

from tinyton.dialects.tt_elementwise import BinaryOp, UnaryOp
from tinyton.dialects.tt_types import INT


@irdl_op_definition
class UmulhiOp(BinaryOp):
    """The high half of the product of two integers taken as unsigned (CUDA's `__umulhi`)."""

    name = "tt.umulhi"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class CosOp(UnaryOp):
    """Cosine (radians)."""

    name = "tt.cos"


@irdl_op_definition
class SinOp(UnaryOp):
    """Sine (radians)."""

    name = "tt.sin"


RANDOM_OPS = (UmulhiOp, CosOp, SinOp)
