"""Kernel semantics of the math builtins that are not one unary op: `tl.fma`, `umulhi`, `div_rn`,
`clamp`, `sigmoid`, as a mixin of `TileBuilder`.
"""

from __future__ import annotations

from typing import Any

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import (
    ARITH,
    INT,
    Tile,
    broadcast_shapes,
    element,
    f32,
    is_number,
    promote,
    shape,
)


class MathOps:
    """Math builtins of `TileBuilder`, whose `emit`, `operand`, `binary` and `unary` they use."""

    def _common(self, rule: str, args: tuple[Any, ...], what: str) -> tuple[Any, tuple[int, ...], list[Tile]]:
        elem = promote(rule, [element(a) for a in args], what)
        to = broadcast_shapes([shape(a) for a in args], what)
        return elem, to, [self.operand(a, elem, to) for a in args]

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        if all(is_number(x) for x in (a, b, c)):
            return a * b + c
        elem, _, operands = self._common(ARITH, (a, b, c), "tl.fma")
        if not tt.is_float(elem):
            return self.binary("+", self.binary("*", a, b), c)
        return self.emit(tt.FmaOp(*(o.value for o in operands)))

    def umulhi(self, a: Any, b: Any) -> Any:
        if is_number(a) and is_number(b):
            return ((a & 0xFFFFFFFF) * (b & 0xFFFFFFFF)) >> 32
        _, _, operands = self._common(INT, (a, b), "tl.umulhi")
        return self.emit(tt.UmulhiOp(*(o.value for o in operands)))

    def div_rn(self, a: Any, b: Any) -> Any:
        if is_number(a) and is_number(b):
            return a / b
        elem, _, operands = self._common(ARITH, (a, b), "tl.div_rn")
        if not tt.is_float(elem):
            raise CompilationError("tl.div_rn divides floats; convert the operands with .to(tl.float32)")
        return self.emit(tt.DivRnOp(*(o.value for o in operands)))

    def clamp(self, x: Any, lo: Any, hi: Any) -> Any:
        """min(max(x, lo), hi), as Triton's (NaN in x propagates)."""
        return self.binary("minimum", self.binary("maximum", x, lo), hi)

    def sigmoid(self, x: Any) -> Any:
        if isinstance(x, Tile) and not tt.is_float(x.type):
            x = self.cast(x, f32)
        return self.binary("/", 1.0, self.binary("+", 1.0, self.unary("exp", self.unary("neg", x))))
