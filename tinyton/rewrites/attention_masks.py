"""The mask rules of `tinyton-canonicalize-attention`: every spelling of a mask on the scores in the form
`where(keep, s, -inf)` that the kernel applies per block and, for a causal `keep`, stops its KV loop at.

- `KeepScoresWhere`: `where(drop, c, s)` with `drop` an index mask and `c` a constant → `where(~drop, s, c)`
  (`tt.where(tt.triu(ones, 1), -inf, s)`, `where(i < j, -inf, s)`): the same selection, with the scores
  kept by the mask, so a causal mask is seen as one;
- `AdditiveMaskToWhere`: `s + m`, `m` an index array of 0 and -inf (`tt.triu(tt.full((n, n), -inf), 1)`,
  `where(keep, 0, -inf)`) → `where(m == 0, s, -inf)`, the causal kernel for nn.Transformer's mask. The one
  difference from NumPy (docs/fusion.md): its `s + -inf` is NaN where a masked-out score is itself +inf or
  NaN (an inf or NaN in q or k under the mask), which a kernel that never computes the blocks the mask
  drops cannot see; the `where` form gives -inf there;
- `ScaleInsideMask`: `where(keep, s, -inf) * c` → `where(keep, s * c, -inf)` for a constant `c > 0`
  (-inf * c is -inf): the scale next to `q @ kᵀ`, where the kernel folds it into its exp2 constant.

Each applies only to scores (`feeds_softmax`); index masks (tinyton/analysis/index_masks.py) are computed
by the kernel from the block's indices, so `~drop` and `m == 0` cost nothing there.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, i1
from xdsl.ir import OpResult
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tinyton.analysis.attention import feeds_softmax
from tinyton.analysis.index_masks import (
    constant_value,
    index_choice,
    index_mask,
    is_constant,
)
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of

_MINUS_INF = float("-inf")


class KeepScoresWhere(RewritePattern):
    """`where(drop, c, s)` → `where(~drop, s, c)` for an index mask `drop` and a constant `c`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.WhereOp, rewriter: PatternRewriter) -> None:
        if not is_constant(op.true_value) or is_constant(op.false_value) or index_mask(op.condition) is None:
            return
        if not feeds_softmax(op.result):
            return
        true = tta.ConstantOp(IntegerAttr(1, i1))
        keep = tta.XorOp(op.condition, true)
        rewriter.replace(op, [true, keep, tta.WhereOp(keep, op.false_value, op.true_value)])


class AdditiveMaskToWhere(RewritePattern):
    """`s + m` (either order) → `where(m == 0, s, -inf)` for an index array `m` of 0 and -inf."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.AddOp, rewriter: PatternRewriter) -> None:
        for s, m in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            choice = index_choice(m)
            if choice is None or {choice.true, choice.false} != {0.0, _MINUS_INF} or shape_of(s.type) != shape_of(op.result.type):
                continue
            if not feeds_softmax(op.result):
                return
            zero = tta.ConstantOp(FloatAttr(0.0, element_type(m.type)))
            keep = tta.CmpOp("eq", m, zero)
            minus_inf = tta.ConstantOp(FloatAttr(_MINUS_INF, element_type(s.type)))
            rewriter.replace(op, [zero, keep, minus_inf, tta.WhereOp(keep, s, minus_inf)])
            return


class ScaleInsideMask(RewritePattern):
    """`where(keep, s, -inf) * c` (or `c * ...`, either branch) → `where(keep, s * c, -inf)`, `c > 0`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.MulOp, rewriter: PatternRewriter) -> None:
        for masked, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            factor = constant_value(c) if is_constant(c) else None
            where = masked.op if isinstance(masked, OpResult) and isinstance(masked.op, tta.WhereOp) else None
            if where is None or not isinstance(factor, float) or not 0 < factor < math.inf or not masked.has_one_use():
                continue
            branches = (where.true_value, where.false_value)
            if shape_of(masked.type) != shape_of(op.result.type) or sum(constant_value(b) == _MINUS_INF for b in branches) != 1:
                continue
            if not feeds_softmax(op.result):
                return
            scores = where.false_value if constant_value(where.true_value) == _MINUS_INF else where.true_value
            scaled = tta.MulOp(scores, c)
            operands = [scaled.result if b is scores else b for b in branches]
            rewriter.replace(op, [scaled, tta.WhereOp(where.condition, *operands)])
            rewriter.erase(where)
            return


MASK_RULES: tuple[RewritePattern, ...] = (KeepScoresWhere(), AdditiveMaskToWhere(), ScaleInsideMask())
