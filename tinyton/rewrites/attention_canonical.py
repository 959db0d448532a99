"""`tinyton-canonicalize-attention`: every spelling of attention's scores and softmax in one form.

Takes and gives: a module of `func.func`s of tta ops (before fusion). Runs first in `tinyton-fuse` and
`tinyton-flash-attention`, so the attention patterns (attention.pdl.mlir, the backward's) and the kernels
see one form:

    s = (q @ kᵀ) * c   [+ bias] [where(mask, s, -inf)]      c: one constant or one one-element array
    p = exp(s - max s) / sum(exp(s - max s))
    o = p @ v          (k and v broadcast over the query heads of a group: grouped-query attention)

Each rule is a small xDSL `RewritePattern`, applied only to scores (values that reach a softmax over their
last axis through score steps, `feeds_softmax`) or to the products of the backward (`ds @ k`, `dsᵀ @ q`),
so the rounding of other programs stays NumPy's:

- `ScaleOutOfOperand`: `(q * c) @ kᵀ`, `(q / c) @ kᵀ`, `q @ (k * c)ᵀ` → `(q @ kᵀ) * c` (or `/ c`): no
  elementwise kernel over q or k before the attention, no second pass over them; in a training step also
  `dsᵀ @ (q * c)` and `(ds * c) @ k`;
- `DivisionToMultiplication`: `s / c` → `s * (1/c)` for a constant c (`/ math.sqrt(d)` costs what `* scale`
  does: the kernel folds one multiplication into its exp2 constant), on the scores and on the gradients;
- `MergeConstantScales`: `(s * a) * b` → `s * (a*b)`;
- `LogSoftmaxToSoftmax`: `exp(s - m - log(sum(exp(s - m))))` and `exp(s - lse)` with `lse` spelled out or
  `tt.logsumexp`'s (tinyton/analysis/logsumexp.py) → `exp(s - m) / sum(exp(s - m))`;
- `ReciprocalToDivision`: `e * (1 / sum)` → `e / sum`;
- `NormalizeBeforeProduct`: `(e @ v) / sum(e)` → `(e / sum(e)) @ v`;
- the mask rules (attention_masks.py): `where(drop, -inf, s)`, `s + where(keep, 0, -inf)`,
  `tt.triu(full(-inf), 1)` and a scale after the mask → `where(keep, s * c, -inf)`;
- the grouped-query rule (attention_groups.py): k and v through `np.repeat` or `broadcast_to(...).reshape`
  → broadcast along a group axis;
- the gradient rules (attention_gradients.py): autograd's `dp * p - p * rowsum(dp * p)`, zeroed under the mask,
  → `p * (dp - rowsum(do * o))`.

A runtime scale (a one-element array argument) stays a step `s * c` (or `s / c`); the kernel reads it once
and folds it with log2(e) (tinyton/lowering/fusion/attention.py).
"""

from __future__ import annotations

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

from tinyton.analysis.attention import feeds_softmax, last_axis_max
from tinyton.analysis.index_masks import is_constant
from tinyton.analysis.logsumexp import row_log_sum, row_logsumexp
from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.rewrites.attention_gradients import GRADIENT_RULES
from tinyton.rewrites.attention_groups import GROUP_RULES
from tinyton.rewrites.attention_masks import MASK_RULES
from tinyton.rewrites.outline import erase_dead_ops, functions

_SCALES = (tta.MulOp, tta.DivOp)


def _scalar(value: SSAValue, depth: int = 4) -> bool:
    """A one-element value of constants and arguments (a runtime scale, maybe `1 / sqrt(d)` of one), not
    one computed from the arrays (the sum of a one-key softmax is no scale)."""
    if prod(shape_of(value.type)) != 1:
        return False
    if not isinstance(value, OpResult) or isinstance(value.op, tta.ConstantOp):
        return True
    elementwise = isinstance(value.op, (tta.BinaryOp, tta.UnaryOp, tta.CastOp, tta.ReshapeOp))
    return depth > 0 and elementwise and all(_scalar(v, depth - 1) for v in value.op.operands)


def _scaled(value: SSAValue, shared: bool = False) -> tuple[Operation, SSAValue, SSAValue] | None:
    """`(op, x, c)` when `value` is `x * c`, `c * x` or `x / c` with `c` one element, used only here
    (unless `shared`)."""
    if not (isinstance(value, OpResult) and isinstance(value.op, _SCALES) and (shared or value.has_one_use())):
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


def _swapped(value: SSAValue) -> tta.TransposeOp | None:
    """The transpose of the last two axes that gives `value`, if one does."""
    op = _op(value, tta.TransposeOp)
    n = len(op.perm) if op is not None else 0
    return op if op is not None and op.perm == (*range(n - 2), n - 1, n - 2) else None


def _probabilities(value: SSAValue) -> bool:
    """`softmax(s)` (`exp(..) / sum`) or `exp(s - lse)`: attention's `p`, through casts."""
    while (cast := _op(value, tta.CastOp)) is not None:
        value = cast.input
    div = _op(value, tta.DivOp)
    return _op(div.lhs, tta.ExpOp) is not None if div is not None else _op(value, tta.ExpOp) is not None


def backward_product_operand(value: SSAValue) -> bool:
    """The left operand of a product of attention's backward: `ds` (`ds @ k`), `dsᵀ` or `pᵀ` (`pᵀ @ do`), not the
    forward's `p` of `p @ v`."""
    transpose = _swapped(value)
    inner = transpose.input if transpose is not None else value
    product = _op(inner, tta.MulOp)
    ds = product is not None and any(_probabilities(v) for v in product.operands)
    return ds or (transpose is not None and _probabilities(inner))


def _gradient_operand(value: SSAValue) -> bool:
    """`p` or `ds = p * (dp - delta)`, maybe transposed: what attention's backward products read."""
    return backward_product_operand(value) or _probabilities(value)


class ScaleOutOfOperand(RewritePattern):
    """`(x ∘ c) @ y` or `x @ (y ∘ c)` (either maybe transposed after scaling) → `(x @ y) ∘ c`, for the
    scores and for the backward's products (`ds @ (k * c)`, `(ds * c)ᵀ @ q`, with `q * c` shared with the
    scores): the forms attention's rewrites read."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.MatmulOp, rewriter: PatternRewriter) -> None:
        scores = feeds_softmax(op.result)
        for side in (0, 1):
            operand, other = op.operands[side], op.operands[1 - side]
            transpose = _swapped(operand)
            found = _scaled(transpose.input if transpose is not None else operand, shared=True)
            if found is None or not (scores or _gradient_operand(other) or _gradient_operand(found[1])):
                continue
            scale, x, c = found
            if transpose is not None:
                moved = tta.TransposeOp(x, transpose.perm)
                rewriter.insert(moved, InsertPoint.before(op))
                x = moved.result
            product = tta.MatmulOp(*((x, other) if side == 0 else (other, x)))
            scaled = type(scale)(product, c)
            rewriter.replace(op, [product, scaled], [scaled.result])
            return


def _gradient(value: SSAValue) -> bool:
    """A product of attention's backward (`ds @ k`, `dsᵀ @ q`, `pᵀ @ do`), maybe summed over a group."""
    while (total := _op(value, tta.ReduceSumOp)) is not None:
        value = total.input
    product = _op(value, tta.MatmulOp)
    return product is not None and any(_gradient_operand(v) for v in product.operands)


class DivisionToMultiplication(RewritePattern):
    """`s / c` → `s * (1/c)` for scores and gradients (`ds @ k / math.sqrt(d)`) and a constant `c`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.DivOp, rewriter: PatternRewriter) -> None:
        c = _float_constant(op.rhs)
        if c is None or c == 0 or not (feeds_softmax(op.result) or _gradient(op.lhs)):
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
            found = row_log_sum(inner.rhs, outer.rhs)
            s = inner.lhs
        else:  # s - lse
            found = row_logsumexp(outer.rhs)
            s = outer.lhs
        if found is None or found.scores != s or (found.guarded and not _contracted_by_rows(op.result)):
            return
        rewriter.replace(op, tta.DivOp(found.exps, found.total))


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
    *GRADIENT_RULES,
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
