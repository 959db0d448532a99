"""Is this tta value the logsumexp of a row, `lse = m + log(sum(exp(s - m)))` with `m` the row's max?

Softmax written through logsumexp, `exp(s - lse)`, is the softmax `exp(s - m) / sum(exp(s - m))`. The
attention canonicalization (tinyton/rewrites/attention_canonical.py) folds it into that form, and the
attention backward (attention_backward.py) reads `p = exp(s - lse)` of a guarded logsumexp as its
probabilities. `tt.logsumexp` (scipy's) guards rows whose max is infinite:

    lse = where(m == inf, inf, where(m == -inf, -inf, log(l) + m))

A row of -inf gives -inf either way (then `exp(s - lse)` is NaN, as the softmax's); a row holding +inf
gives +inf, so `exp(s - lse)` is NaN only where `s` is +inf and 0 elsewhere, where the softmax of the row
is NaN throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of


@dataclass(frozen=True)
class RowLogSumExp:
    """`lse = m + log(l)` of `scores` over their last axis, `l = sum(exps)`, `exps = exp(scores - m)`."""

    scores: SSAValue
    exps: SSAValue
    total: SSAValue
    guarded: bool
    """Whether the rows with an infinite max are guarded as `tt.logsumexp` guards them."""
    ops: tuple[Operation, ...]
    """Every op from the max to `lse` (guards and reshapes included)."""


def _op(value: SSAValue, kind: type) -> Operation | None:
    return value.op if isinstance(value, OpResult) and isinstance(value.op, kind) else None


def _float(value: SSAValue) -> float | None:
    op = _op(value, tta.ConstantOp)
    return op.value.value.data if op is not None and isinstance(op.value, FloatAttr) else None


def _infinity_guard(value: SSAValue) -> SSAValue | None:
    """`x` when `value` is `where(x == c, c, ...)` for c = +inf or -inf (either operand order)."""
    where = _op(value, tta.WhereOp)
    cmp = _op(where.condition, tta.CmpOp) if where is not None else None
    c = _float(where.true_value) if where is not None else None
    if cmp is None or cmp.predicate.data != "eq" or c is None or not math.isinf(c):
        return None
    for x, bound in ((cmp.lhs, cmp.rhs), (cmp.rhs, cmp.lhs)):
        if _float(bound) == c:
            return x
    return None


def row_log_sum(m: SSAValue, log_sum: SSAValue) -> RowLogSumExp | None:
    """The unguarded `RowLogSumExp` of `m + log_sum` when `m` is the last-axis max of some scores and
    `log_sum` is `log(sum(exp(scores - m)))` over that axis (both keeping it); None otherwise."""
    rmax, log = _op(m, tta.ReduceMaxOp), _op(log_sum, tta.LogOp)
    total = _op(log.input, tta.ReduceSumOp) if log is not None else None
    exp = _op(total.input, tta.ExpOp) if total is not None else None
    centered = _op(exp.input, tta.SubOp) if exp is not None else None
    if centered is None or rmax is None:
        return None
    s, last = rmax.input, len(shape_of(rmax.input.type)) - 1
    if centered.lhs != s or centered.rhs != m or not (rmax.keeps_dims and total.keeps_dims):
        return None
    if rmax.axis.value.data != last or total.axis.value.data != last:
        return None
    return RowLogSumExp(s, exp.result, total.result, False, (rmax, centered, exp, total, log))


def row_logsumexp(lse: SSAValue) -> RowLogSumExp | None:
    """`lse` as a `RowLogSumExp`: `m + log(l)` (either order), through reshapes that give back its shape
    (`tt.logsumexp(s, -1)[..., None]`) and `tt.logsumexp`'s guards; None otherwise."""
    value, outer = lse, []
    while (reshape := _op(value, tta.ReshapeOp)) is not None:
        outer.append(reshape)
        value = reshape.input
    if shape_of(value.type) != shape_of(lse.type):
        return None
    guarded = []
    while (x := _infinity_guard(value)) is not None:
        guarded.append(x)
        outer += [value.op, value.op.condition.op]
        value = value.op.false_value
    add = _op(value, tta.AddOp)
    if add is None:
        return None
    m, log_sum = (add.lhs, add.rhs) if _op(add.rhs, tta.LogOp) else (add.rhs, add.lhs)
    found = row_log_sum(m, log_sum)
    if found is None or any(x != m for x in guarded):
        return None
    return RowLogSumExp(found.scores, found.exps, found.total, bool(guarded), (*found.ops, add, *reversed(outer)))
