"""The backward rules of `tinyton-canonicalize-attention`: autograd's spelling of attention's gradients in the
form the backward rewrite reads (tinyton/analysis/attention_backward.py), `ds = p * (dp - rowsum(do * o))`.

torch's autograd writes the softmax's backward as `dp * p - p * rowsum(dp * p)`, zeroes it where the forward's
mask put -inf, and computes `rowsum(dp * p)` where FlashAttention-2 computes `rowsum(do * o)`. The torch backend
recomputes the scores and probabilities in the backward graph (tinyton/torch/backend.py), so these rules give the
FlashAttention-2 kernels the textbook form:

- `FactorProbabilities`: `dp * p - p * r` → `p * (dp - r)` for probabilities `p` and a row vector `r`;
- `DropMaskedGradient`: `where(drop, 0, p * t)` (or `where(keep, p * t, 0)`) → `p * t` where the forward's
  scores are -inf exactly on `drop` (an index mask, or the same mask array): `p` is 0 there, so the product is too;
- `DeltaFromOutput`: `rowsum((do @ vᵀ) * p)` → `rowsum(do * (p @ v))`, the same sum (`dp = do @ vᵀ`) over D
  columns instead of S keys, when the program does not compute `o = p @ v` itself.

Each applies only where `p` is attention's probabilities (a softmax, or `exp(s - lse)`), so no other program's
rounding changes.
"""

from __future__ import annotations

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tinyton.analysis.attention_backward import op_through_casts, probability_scores
from tinyton.analysis.index_masks import constant_value, index_mask, is_constant, is_minus_inf, negated
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of


def _probabilities(p: SSAValue) -> bool:
    return probability_scores(p) is not None


def _score_mask(p: SSAValue) -> tuple[SSAValue, bool] | None:
    """The condition of the `where` that gives the scores behind probabilities `p` their -inf entries, and
    whether they are -inf where it holds (`where(drop, -inf, s)`) rather than where it does not
    (`where(keep, s, -inf)`)."""
    s = probability_scores(p)
    where = op_through_casts(s, tta.WhereOp) if s is not None else None
    if where is None:
        return None
    if is_minus_inf(where.false_value):
        return where.condition, False
    return (where.condition, True) if is_minus_inf(where.true_value) else None


def _same_dropped(p: SSAValue, condition: SSAValue, zero_where_true: bool) -> bool:
    """Whether `where(condition, ...)` zeroes exactly the entries where the scores behind `p` are -inf: the same
    condition value (a mask array) or the same index mask, on the same side."""
    found = _score_mask(p)
    if found is None:
        return False
    scores_condition, inf_where_true = found
    if scores_condition == condition:
        return inf_where_true == zero_where_true
    mask, scores_mask = index_mask(condition), index_mask(scores_condition)
    if mask is None or scores_mask is None:
        return False
    zeroed = mask if zero_where_true else negated(mask)
    return zeroed == (scores_mask if inf_where_true else negated(scores_mask))


def _row_vector(value: SSAValue, like: SSAValue) -> bool:
    """`value` holds one element a row of `like` (`[..., S_q, 1]`)."""
    shape, rows = shape_of(value.type), shape_of(like.type)
    return len(shape) == len(rows) and shape[-1] == 1 and shape[:-1] == rows[:-1]


class FactorProbabilities(RewritePattern):
    """`dp * p - p * r` (products in either order) → `p * (dp - r)`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.SubOp, rewriter: PatternRewriter) -> None:
        first, second = op_through_casts(op.lhs, tta.MulOp), op_through_casts(op.rhs, tta.MulOp)
        if first is None or second is None or op.lhs.type != op.result.type:
            return
        for p in set(first.operands) & set(second.operands):
            if not _probabilities(p) or p.type != op.result.type:
                continue
            dp = first.rhs if first.lhs == p else first.lhs
            r = second.rhs if second.lhs == p else second.lhs
            if dp.type == op.result.type and _row_vector(r, p):
                diff = tta.SubOp(dp, r)
                rewriter.replace(op, [diff, tta.MulOp(p, diff.result)])
                return


class DropMaskedGradient(RewritePattern):
    """`where(drop, 0, p * t)` / `where(keep, p * t, 0)` → `p * t` where `p`'s scores are -inf on `drop` (the same
    mask array, or the same index mask)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.WhereOp, rewriter: PatternRewriter) -> None:
        for zero, kept, zero_where_true in ((op.true_value, op.false_value, True), (op.false_value, op.true_value, False)):
            product = op_through_casts(kept, tta.MulOp)
            if not is_constant(zero) or constant_value(zero) != 0.0 or product is None or kept.type != op.result.type:
                continue
            if any(_same_dropped(p, op.condition, zero_where_true) for p in product.operands if p.type == kept.type):
                rewriter.replace(op, [], [kept])
                return


class DeltaFromOutput(RewritePattern):
    """`rowsum((do @ vᵀ) * p)` → `rowsum(do * (p @ v))` for probabilities `p` no `p @ v` of the program reads."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.ReduceSumOp, rewriter: PatternRewriter) -> None:
        product = op_through_casts(op.input, tta.MulOp)
        rank = len(shape_of(op.input.type))
        if product is None or not op.keeps_dims or op.axis.value.data != rank - 1:
            return
        for dp, p in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
            dp_op = op_through_casts(dp, tta.MatmulOp)
            vt = op_through_casts(dp_op.rhs, tta.TransposeOp) if dp_op is not None else None
            if vt is None or vt.perm != (*range(rank - 2), rank - 1, rank - 2) or not _probabilities(p):
                continue
            v = vt.input
            if any(isinstance(u.operation, tta.MatmulOp) and u.operation.lhs == p and u.operation.rhs == v for u in p.uses):
                return  # the program's own `o = p @ v`: the backward rewrite reads the delta as it is
            o = tta.MatmulOp(p, v)
            if o.result.type != dp_op.lhs.type:
                return
            weighted = tta.MulOp(dp_op.lhs, o.result)
            rewriter.replace(op, [o, weighted, tta.ReduceSumOp(weighted.result, rank - 1, True)])
            return


GRADIENT_RULES: tuple[RewritePattern, ...] = (FactorProbabilities(), DropMaskedGradient(), DeltaFromOutput())
