"""An index bias on a block of scores (tinyton/analysis/index_bias.py): its tree replayed on the block's row and column
indices, giving the values the program computes, each step in the cheapest type that gives them.

- Index arithmetic only cast to floats, bounded below 2**24, is computed in f32, where such integers are exact: the
  rows' and columns' indices converted once a block (`[BM, 1]` and `[1, BN]`), the block's `j - i` then one add an
  element, where an integer subtraction and a conversion an element would compete with the softmax's exp2 for the
  SFU's issue slots.
- float16 and bfloat16 steps are computed in f32 and rounded to their type after each (NumPy's float16 arithmetic;
  f32 has the 2p + 2 bits that make the double rounding exact).
- A float64 step of values exact in f32 whose result is only rounded to f32 or narrower (torch's rules compute
  `slope * (j - i)` in float64 and round once) is computed in f32: with 53 >= 2 * 24 + 2 bits the rounding through
  float64 gives what one f32 rounding gives.
- Other integer steps run in their own type, other float64 steps in float64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import Float64Type, IntegerType
from xdsl.ir import Attribute, OpResult, SSAValue

from tinyton.analysis.index_bias import index_affine, is_leaf
from tinyton.analysis.index_masks import Affine, constant_value
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.lowering.fusion.emitter import Emitter, f32

EXACT_IN_F32 = 1 << 24
"""Integers of at most this magnitude are exact in f32."""

_BINARY = {tta.AddOp: tt.AddOp, tta.SubOp: tt.SubOp, tta.MulOp: tt.MulOp, tta.DivOp: tt.DivOp,
           tta.MaximumOp: tt.MaximumOp, tta.MinimumOp: tt.MinimumOp}  # fmt: skip
_EXACT = (tta.MaximumOp, tta.MinimumOp, tta.NegOp, tta.AbsOp, tta.ReshapeOp, tta.BroadcastToOp)
"""Steps that round nothing: computed in the type their operands are held in."""


def _is_f64(element: Attribute) -> bool:
    return isinstance(element, Float64Type)


def _bound(affine: Affine, shape: tuple[int, ...]) -> int | None:
    """The largest magnitude of an affine index expression over `shape`'s indices; None with run-time inputs."""
    if affine.scalars:
        return None
    return abs(affine.const) + sum(abs(c) * (shape[p] - 1) for p, c in affine.coef)


def _only_cast_to_floats(value: SSAValue, f64: bool = True) -> bool:
    """Whether every use of `value` casts it to a float (of at most 32 bits unless `f64`)."""
    return all(isinstance(u.operation, tta.CastOp) and is_float(t := element_type(u.operation.results[0].type))
               and (f64 or not _is_f64(t)) for u in value.uses)  # fmt: skip


class BiasTiles:
    """Index biases on one block: `tile(value, rows, cols)`, given how to compute an affine index expression in i32
    (`affine_tile`) and read a leaf at the program's batch entry (`read_leaf`)."""

    def __init__(self, em: Emitter, affine_tile: Callable[[Affine, SSAValue, SSAValue], SSAValue],
                 read_leaf: Callable[[SSAValue], SSAValue]):
        self.em, self.affine_tile, self.read_leaf = em, affine_tile, read_leaf

    def tile(self, value: SSAValue, rows: SSAValue, cols: SSAValue) -> SSAValue:
        """The bias on the block whose query indices are `rows` and key indices `cols`, in f32."""
        self.rows, self.cols, self.done = rows, cols, {}
        return self.em.cast(self._tile(value), f32)

    def _tile(self, value: SSAValue) -> SSAValue:
        if value not in self.done:
            self.done[value] = self._compute(value)
        return self.done[value]

    def _compute(self, value: SSAValue) -> SSAValue:
        em, element = self.em, element_type(value.type)
        if isinstance(element, IntegerType) and (affine := index_affine(value)) is not None:
            return self._index(value, affine)
        if (number := constant_value(value)) is not None:
            exact = not _is_f64(element) or float(np.float32(number)) == float(number)
            return em.const(number, element if isinstance(element, IntegerType) or not exact else f32)
        if is_leaf(value):
            read = self.read_leaf(value)
            return read if isinstance(element, IntegerType) or _is_f64(element) else em.cast(read, f32)
        assert isinstance(value, OpResult)
        op = value.op
        inputs = [self._tile(v) for v in op.operands]
        if isinstance(op, tta.CastOp):
            return self._cast(inputs[0], element)
        if isinstance(op, _EXACT):
            if isinstance(op, (tta.ReshapeOp, tta.BroadcastToOp)):
                return inputs[0]
            if isinstance(op, (tta.NegOp, tta.AbsOp)):
                return em.emit((tt.NegOp if isinstance(op, tta.NegOp) else tt.AbsOp)(inputs[0]))
            return em.binary(_BINARY[type(op)], *self._common(inputs))
        if isinstance(element, IntegerType):
            return em.binary(_BINARY[type(op)], *(em.cast(v, element) for v in inputs))
        exact_in_f32 = all(element_type(v.type) == f32 for v in inputs) and _only_cast_to_floats(value, f64=False)
        if _is_f64(element) and not exact_in_f32:
            return em.binary(_BINARY[type(op)], *(em.cast(v, element) for v in inputs))
        result = em.binary(_BINARY[type(op)], *(em.cast(v, f32) for v in inputs))
        return result if _is_f64(element) or element == f32 else em.cast(em.cast(result, element), f32)

    def _index(self, value: SSAValue, affine: Affine) -> SSAValue:
        """An affine index expression: in f32 from indices converted once a block when it is only cast to floats
        and bounded below 2**24, else in i32 and widened to its type."""
        em, bound = self.em, _bound(affine, shape_of(value.type))
        if bound is None or bound > EXACT_IN_F32 or not _only_cast_to_floats(value):
            return em.cast(self.affine_tile(affine, self.rows, self.cols), element_type(value.type))
        terms = [em.const(float(affine.const), f32)] if affine.const or not affine.coef else []
        for position, coef in affine.coef:
            index = em.cast(self.rows if position == -2 else self.cols, f32)
            terms.append(index if coef == 1 else em.binary(tt.MulOp, index, em.const(float(coef), f32)))
        total = terms[0]
        for term in terms[1:]:
            total = em.binary(tt.AddOp, total, term)
        return total

    def _cast(self, tile: SSAValue, element: Attribute) -> SSAValue:
        """A cast step of a tile held as `_compute` holds it: to integers as such; to float64 kept in f32 where the
        tile is f32 (exact); to a float of at most 32 bits rounded to it, held in f32."""
        em, held = self.em, element_type(tile.type)
        if isinstance(element, IntegerType):
            return em.cast(tile, element)
        if _is_f64(element):
            return tile if held == f32 else em.cast(tile, element)
        rounded = em.cast(tile, element)
        return rounded if element == f32 else em.cast(rounded, f32)

    def _common(self, tiles: list[SSAValue]) -> list[SSAValue]:
        """Operands of an exact step in one type: the widest they are held in."""
        types = {element_type(t.type) for t in tiles}
        if len(types) == 1:
            return tiles
        widest = next((t for t in types if _is_f64(t)), f32 if f32 in types else next(iter(types)))
        return [self.em.cast(t, widest) for t in tiles]
