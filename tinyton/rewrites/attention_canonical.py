"""`tinyton-canonicalize-attention`: every spelling of attention's scores and softmax in one form.

Takes and gives: a module of `func.func`s of tta ops (before fusion). Runs first in `tinyton-fuse` and
`tinyton-flash-attention`, so the attention pattern (attention.pdl.mlir) and the kernel see one form:

    s = (q @ kᵀ) * c   [+ bias] [where(mask, s, -inf)]      c: one constant or one one-element array
    p = exp(s - max s) / sum(exp(s - max s))

Each rule is a small xDSL `RewritePattern`, applied only to scores (values that reach a softmax over their
last axis through score steps, `feeds_softmax`), so the rounding of other programs stays NumPy's:

- `ScaleOutOfOperand`: `(q * c) @ kᵀ`, `(q / c) @ kᵀ`, `q @ (k * c)ᵀ` → `(q @ kᵀ) * c` (or `/ c`): no
  elementwise kernel over q or k before the attention, no second pass over them;
- `DivisionToMultiplication`: `s / c` → `s * (1/c)` for a constant c (`/ math.sqrt(d)` costs what `* scale`
  does: the kernel folds one multiplication into its exp2 constant);
- `MergeConstantScales`: `(s * a) * b` → `s * (a*b)`;
- `LogSoftmaxToSoftmax`: `exp(s - m - log(sum(exp(s - m))))` and `exp(s - (m + log(sum(exp(s - m)))))`
  (softmax through logsumexp, `tt.logsumexp` traced or spelled out) → `exp(s - m) / sum(exp(s - m))`;
- `ReciprocalToDivision`: `e * (1 / sum)` → `e / sum`.

A runtime scale (a one-element array argument) stays a step `s * c` (or `s / c`); the kernel reads it once
and folds it with log2(e) (tinyton/lowering/fusion/attention.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tinyton.analysis.attention import feeds_softmax, is_constant, last_axis_max
from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.rewrites.attention_groups import GROUP_RULES
from tinyton.rewrites.attention_masks import MASK_RULES
from tinyton.rewrites.outline import erase_dead_ops, functions

_SCALES = (tta.MulOp, tta.DivOp)


def _scalar(value: SSAValue) -> bool:
    """A one-element value (a constant, or an array argument such as a runtime scale)."""
    return prod(shape_of(value.type)) == 1


def _scaled(value: SSAValue) -> tuple[Operation, SSAValue, SSAValue] | None:
    """`(op, x, c)` when `value` is `x * c`, `c * x` or `x / c` with `c` one element, used only here."""
    if not (isinstance(value, OpResult) and isinstance(value.op, _SCALES) and value.has_one_use()):
        return None
    op = value.op
    for x, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)) if isinstance(op, tta.MulOp) else ((op.lhs, op.rhs),):
        if _scalar(c) and shape_of(x.type) == shape_of(value.type):
            return op, x, c
    return None


def _float_constant(value: SSAValue) -> float | None:
    if is_constant(value) and isinstance(value.op.value, FloatAttr):
        return value.op.value.value.data
    return None


class ScaleOutOfOperand(RewritePattern):
    """`(x ∘ c) @ y` or `x @ (y ∘ c)` (`y` possibly transposed after scaling) → `(x @ y) ∘ c`, for scores."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.MatmulOp, rewriter: PatternRewriter) -> None:
        if not feeds_softmax(op.result):
            return
        lhs, rhs = op.lhs, op.rhs
        found = _scaled(lhs)
        if found is not None:
            scale, lhs, c = found
        else:
            transpose = rhs.op if isinstance(rhs, OpResult) and isinstance(rhs.op, tta.TransposeOp) else None
            found = _scaled(transpose.input if transpose is not None and rhs.has_one_use() else rhs)
            if found is None:
                return
            scale, rhs, c = found
            if transpose is not None:
                moved = tta.TransposeOp(rhs, transpose.perm)
                rewriter.insert(moved, InsertPoint.before(op))
                rhs = moved.result
        product = tta.MatmulOp(lhs, rhs)
        scaled = type(scale)(product, c)
        rewriter.replace(op, [product, scaled], [scaled.result])


class DivisionToMultiplication(RewritePattern):
    """`s / c` → `s * (1/c)` for scores and a constant `c`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.DivOp, rewriter: PatternRewriter) -> None:
        c = _float_constant(op.rhs)
        if c is None or c == 0 or not feeds_softmax(op.result):
            return
        inverse = tta.ConstantOp(FloatAttr(1.0 / c, element_type(op.rhs.type)))
        rewriter.replace(op, [inverse, tta.MulOp(op.lhs, inverse)])


class MergeConstantScales(RewritePattern):
    """`(s * a) * b` → `s * (a*b)` for scores and constants `a`, `b`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.MulOp, rewriter: PatternRewriter) -> None:
        b = _float_constant(op.rhs)
        inner = _scaled(op.lhs) if b is not None else None
        if inner is None or not isinstance(inner[0], tta.MulOp) or not feeds_softmax(op.result):
            return
        _, s, a_value = inner
        a = _float_constant(a_value)
        if a is None:
            return
        merged = tta.ConstantOp(FloatAttr(a * b, element_type(op.rhs.type)))
        rewriter.replace(op, [merged, tta.MulOp(s, merged)])


def _op(value: SSAValue, kind: type) -> Operation | None:
    return value.op if isinstance(value, OpResult) and isinstance(value.op, kind) else None


def _row_max_and_sum(m: SSAValue, log_sum: SSAValue, s: SSAValue) -> SSAValue | None:
    """The exponentials `exp(s - m)` when `m` is the last-axis max of `s` and `log_sum` is
    `log(sum(exp(s - m)))` over the last axis; None otherwise."""
    rmax, log = _op(m, tta.ReduceMaxOp), _op(log_sum, tta.LogOp)
    total = _op(log.input, tta.ReduceSumOp) if log is not None else None
    if rmax is None or total is None or rmax.input != s or not last_axis_max(rmax) or not total.keeps_dims:
        return None
    exp = _op(total.input, tta.ExpOp)
    centered = _op(exp.input, tta.SubOp) if exp is not None else None
    if centered is None or centered.lhs != s or centered.rhs != m or total.axis.value.data != rmax.axis.value.data:
        return None
    return exp.result


def _infinity_guard(value: SSAValue) -> SSAValue | None:
    """`x` when `value` is `where(x == c, c, ...)` for c = +inf or -inf (either operand order)."""
    where = _op(value, tta.WhereOp)
    cmp = _op(where.condition, tta.CmpOp) if where is not None else None
    if cmp is None or cmp.predicate.data != "eq":
        return None
    c = _float_constant(where.true_value)
    for x, bound in ((cmp.lhs, cmp.rhs), (cmp.rhs, cmp.lhs)):
        if c is not None and math.isinf(c) and _float_constant(bound) == c:
            return x
    return None


def _max_plus_log_sum(lse: SSAValue) -> tuple[SSAValue, SSAValue, bool] | None:
    """`(m, log(l), guarded)` when `lse` is `m + log(l)` (either order); reshapes that give back its shape
    (`tt.logsumexp(s, -1)[..., None]`) and `tt.logsumexp`'s guards of infinite maxima,
    `where(m == inf, inf, where(m == -inf, -inf, ...))`, looked through (`guarded`)."""
    value = lse
    while (reshape := _op(value, tta.ReshapeOp)) is not None:
        value = reshape.input
    if shape_of(value.type) != shape_of(lse.type):
        return None
    guarded = []
    while (x := _infinity_guard(value)) is not None:
        guarded.append(x)
        value = value.op.false_value
    add = _op(value, tta.AddOp)
    if add is None:
        return None
    m, log_sum = (add.lhs, add.rhs) if _op(add.rhs, tta.LogOp) else (add.rhs, add.lhs)
    return (m, log_sum, bool(guarded)) if all(x == m for x in guarded) else None


def _contracted_by_rows(value: SSAValue) -> bool:
    """Every user reads `value` as the left operand of a matmul (`p @ v`): a row with a NaN gives a NaN
    row whatever else it holds."""
    return all(isinstance(use.operation, tta.MatmulOp) and use.index == 0 for use in value.uses)


class LogSoftmaxToSoftmax(RewritePattern):
    """`exp(s - m - log(l))` or `exp(s - lse)`, `lse = m + log(l)` (`tt.logsumexp`), with `m` the row max
    of `s` and `l` the row sum of `exp(s - m)`, → `exp(s - m) / l`: softmax written through logsumexp.

    `tt.logsumexp` guards rows whose max is infinite. A row of -inf gives NaN either way; a row holding
    +inf gives NaN where the scores are +inf and 0 elsewhere, where the softmax gives a row of NaN: the
    same once the row is contracted (`p @ v`), so a guarded logsumexp is folded only there."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.ExpOp, rewriter: PatternRewriter) -> None:
        outer = _op(op.input, tta.SubOp)
        if outer is None:
            return
        inner = _op(outer.lhs, tta.SubOp)
        if inner is not None:  # (s - m) - log(l)
            s, m, log_sum = inner.lhs, inner.rhs, outer.rhs
        else:  # s - lse
            found = _max_plus_log_sum(outer.rhs)
            if found is None or (found[2] and not _contracted_by_rows(op.result)):
                return
            s, (m, log_sum, _) = outer.lhs, found
        e = _row_max_and_sum(m, log_sum, s)
        if e is None:
            return
        total = _op(log_sum, tta.LogOp).input
        rewriter.replace(op, tta.DivOp(e, total))


class NormalizeBeforeProduct(RewritePattern):
    """`(e @ v) / l` → `(e / l) @ v` for `e = exp(s - m)` and `l` its row sum (the normalisation deferred
    past the product, as the kernel itself defers it)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.DivOp, rewriter: PatternRewriter) -> None:
        product, total = _op(op.lhs, tta.MatmulOp), _op(op.rhs, tta.ReduceSumOp)
        if product is None or total is None or not product.result.has_one_use() or total.input != product.lhs:
            return
        e = product.lhs
        exp = _op(e, tta.ExpOp)
        centered = _op(exp.input, tta.SubOp) if exp is not None else None
        rmax = _op(centered.rhs, tta.ReduceMaxOp) if centered is not None else None
        if rmax is None or rmax.input != centered.lhs or not last_axis_max(rmax) or not total.keeps_dims:
            return
        if total.axis.value.data != len(shape_of(e.type)) - 1 or {u.operation for u in e.uses} != {product, total}:
            return
        p = tta.DivOp(e, total.result)
        rewriter.replace(op, [p, tta.MatmulOp(p.result, product.rhs)])
        rewriter.erase(product)


class ReciprocalToDivision(RewritePattern):
    """`e * (1 / l)` → `e / l` (softmax normalised by a reciprocal)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.MulOp, rewriter: PatternRewriter) -> None:
        for e, r in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            reciprocal = _op(r, tta.DivOp)
            if reciprocal is not None and _float_constant(reciprocal.lhs) == 1.0 and _op(reciprocal.rhs, tta.ReduceSumOp):
                if shape_of(e.type) == shape_of(op.result.type) and _op(e, tta.ExpOp):
                    rewriter.replace(op, tta.DivOp(e, reciprocal.rhs))
                    return


RULES: tuple[RewritePattern, ...] = (
    LogSoftmaxToSoftmax(),
    ReciprocalToDivision(),
    NormalizeBeforeProduct(),
    ScaleOutOfOperand(),
    DivisionToMultiplication(),
    MergeConstantScales(),
    *MASK_RULES,
    *GROUP_RULES,
)


def canonicalize_attention(module: ModuleOp) -> None:
    """Apply `RULES` to a fixpoint, then drop what they left unused (the softmax pattern counts uses)."""
    PatternRewriteWalker(GreedyRewritePatternApplier(list(RULES)), apply_recursively=True).rewrite_module(module)
    for fn in functions(module):
        erase_dead_ops(fn)


@dataclass(frozen=True)
class CanonicalizeAttentionPass(ModulePass):
    """Scales moved out of q and k, divisions by constants made multiplications, softmax through
    logsumexp made softmax: one form of attention for the flash-attention pattern."""

    name = "tinyton-canonicalize-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        canonicalize_attention(op)
