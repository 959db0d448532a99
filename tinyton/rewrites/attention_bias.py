"""The bias rule of `tinyton-canonicalize-attention`: the terms of an additive bias that do not vary along the keys
dropped, when only a softmax reads the scores.

A softmax is the same for `s + b(i, j)` and for `s + b(i, j) - c(i)`: every row is shifted by one value. ALiBi's bias,
`slope[h] * (j - i)` (Press et al.), is `slope[h] * j - slope[h] * i`, whose second term is one value a row: dropped,
the bias is `slope[h] * j`, `[H, 1, S]` where it was `[H, S, S]`, and the attention kernel reads H x S bias values
where it read H x S x S (fp32 at S = 2048 and 32 heads: 256 KiB against 512 MiB).

`DropRowConstantBias`: `s + b` (either order) or `s - b` feeding a softmax whose row max and sum nothing else reads (the
logsumexp the program might return moves with the shift), `b` split into terms through adds, subtractions,
negations, products with a factor constant along the keys (`slope[h]`), float casts (torch's rules compute in
float64 and round once) and casts of index arithmetic (aranges and integer constants, whose values are exact in the
float type: up to 2048 in float16, 2**24 in float32), each term constant along the keys (its last dim 1: `arange(S).reshape(S, 1)`, a per-head
slope) dropped. The product `slope * j` rounds once where `slope * (j - i)`
rounded another value, as the other scale rules (attention_canonical.py) round differently from the program as
written.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from tinyton.analysis.attention import last_axis_max
from tinyton.analysis.index_masks import constant_value
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, is_float, is_int, shape_of

_KEPT = object()
"""`_split`'s answer for a term it cannot split: the term is kept whole."""


def _constant_along_keys(value: SSAValue) -> bool:
    shape = shape_of(value.type)
    return not shape or shape[-1] == 1


SIGNIFICAND_BITS = {Float16Type: 11, BFloat16Type: 8, Float32Type: 24, Float64Type: 53}
"""Integers up to 2**bits in magnitude are exact in each float type."""


def _exact_indices(value: SSAValue, bits: int, budget: int = 16) -> tuple[int, int] | None:
    """The range of integer index arithmetic (aranges, integer constants, their sums, differences, negations, layouts
    and integer casts), when every value of it and of its parts is exact in a float of `bits` significand bits (so a
    cast of a difference is the difference of the casts); None otherwise."""
    op = value.op if isinstance(value, OpResult) else None
    if budget == 0 or op is None or not is_int(element_type(value.type)):
        return None
    if isinstance(op, tta.ArangeOp):
        found = (op.start.value.data, op.end.value.data - 1)
    elif isinstance(op, tta.ConstantOp):
        found = (op.value.value.data, op.value.value.data)
    elif isinstance(op, (tta.ReshapeOp, tta.BroadcastToOp, tta.CastOp, tta.NegOp)):
        inner = _exact_indices(op.operands[0], bits, budget - 1)
        found = None if inner is None else (-inner[1], -inner[0]) if isinstance(op, tta.NegOp) else inner
    elif isinstance(op, (tta.AddOp, tta.SubOp)):
        a, b = (_exact_indices(v, bits, budget - 1) for v in op.operands)
        if a is None or b is None:
            return None
        found = (a[0] + b[0], a[1] + b[1]) if isinstance(op, tta.AddOp) else (a[0] - b[1], a[1] - b[0])
    else:
        return None
    return found if max(abs(found[0]), abs(found[1])) <= 1 << bits else None


def _split(value: SSAValue, rewriter: PatternRewriter, anchor: Operation) -> SSAValue | None | object:
    """`value` less its terms that are constant along the keys: a new value, None (all of it is), or `_KEPT` (no
    term is, or the value cannot be split); new ops go before `anchor`."""
    if _constant_along_keys(value):
        return None
    op = value.op if isinstance(value, OpResult) else None
    if isinstance(op, (tta.AddOp, tta.SubOp)):
        parts = [_split(v, rewriter, anchor) for v in op.operands]
        if all(p is _KEPT for p in parts):
            return _KEPT
        left, right = (v if p is _KEPT else p for v, p in zip(op.operands, parts))
        if right is None:
            return left
        if left is None:
            return right if isinstance(op, tta.AddOp) else _emit(rewriter, anchor, tta.NegOp(right))
        return _emit(rewriter, anchor, type(op)(left, right))
    if isinstance(op, tta.NegOp):
        inner = _split(op.input, rewriter, anchor)
        return inner if inner is None or inner is _KEPT else _emit(rewriter, anchor, tta.NegOp(inner))
    if isinstance(op, tta.MulOp):
        for factor, term in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if _constant_along_keys(factor):
                inner = _split(term, rewriter, anchor)
                return inner if inner is None or inner is _KEPT else _emit(rewriter, anchor, tta.MulOp(factor, inner))
        return _KEPT
    if isinstance(op, tta.CastOp) and is_float(element_type(value.type)):
        bits = SIGNIFICAND_BITS.get(type(element_type(value.type)))
        exact = is_float(element_type(op.input.type)) or (bits is not None and _exact_indices(op.input, bits))
        if not exact:
            return _KEPT
        inner = _split(op.input, rewriter, anchor)
        if inner is None or inner is _KEPT:
            return inner
        return _emit(rewriter, anchor, tta.CastOp(inner, element_type(value.type)))
    return _KEPT


def _emit(rewriter: PatternRewriter, anchor: Operation, op: Operation) -> SSAValue:
    rewriter.insert(op, InsertPoint.before(anchor))
    return op.results[0]


def _softmax_only(value: SSAValue, budget: int = 16) -> bool:
    """Whether `value` reaches, through single-use steps that keep a shift of the rows a shift (`_keeps_shifts`),
    scores read only by a last-axis softmax whose row max and sum nothing else reads: `exp(s - max s) / sum(exp(s -
    max s))`, normalised probabilities alone."""
    while budget:
        budget -= 1
        users = {u.operation for u in value.uses}
        rmax = next((u for u in users if last_axis_max(u)), None)
        if rmax is not None:
            return len(users) == 2 and _normalised(value, rmax)
        if len(users) != 1 or not _keeps_shifts(user := users.pop(), value):
            return False
        value = user.results[0]
    return False


def _keeps_shifts(op: Operation, value: SSAValue) -> bool:
    """Whether `op` of `value` (of its shape) turns `value - c`, `c` one value a row, into its own result less one value
    a row: adding or subtracting anything, negating, scaling by a factor constant along the keys, or masking with
    -inf. Not a clamp (`maximum(s, floor)`), a finite fill or a factor that varies along the keys."""
    if not op.results or shape_of(op.results[0].type) != shape_of(value.type):
        return False
    if isinstance(op, (tta.AddOp, tta.SubOp, tta.NegOp)):
        return True
    if isinstance(op, tta.MulOp) or (isinstance(op, tta.DivOp) and op.lhs is value):
        other = op.rhs if op.lhs is value else op.lhs
        return other is not value and _constant_along_keys(other)
    if isinstance(op, tta.WhereOp) and op.condition is not value:
        other = op.false_value if op.true_value is value else op.true_value
        return other is not value and constant_value(other) == float("-inf")
    return False


def _normalised(s: SSAValue, rmax: Operation) -> bool:
    """`exp(s - m) / sum(exp(s - m))` with `m = rmax(s)`, each intermediate read only there."""
    sub = _only_user(rmax.results[0])
    if not isinstance(sub, tta.SubOp) or sub.lhs is not s or sub.rhs is not rmax.results[0]:
        return False
    exp = _only_user(sub.result)
    if not isinstance(exp, tta.ExpOp):
        return False
    users = {u.operation for u in exp.result.uses}
    total = next((u for u in users if isinstance(u, tta.ReduceSumOp)), None)
    div = _only_user(total.result) if total is not None and len(users) == 2 else None
    return isinstance(div, tta.DivOp) and div.lhs is exp.result and div.rhs is total.result and div in users


def _only_user(value: SSAValue) -> Operation | None:
    users = {u.operation for u in value.uses}
    return users.pop() if len(users) == 1 else None


class DropRowConstantBias(RewritePattern):
    """`s + b`, `b + s` or `s - b` → the same of `b'`, `b` less its terms constant along the keys, for scores read
    only by a softmax."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, (tta.AddOp, tta.SubOp)):
            return
        orders = ((op.lhs, op.rhs), (op.rhs, op.lhs)) if isinstance(op, tta.AddOp) else ((op.lhs, op.rhs),)
        for s, b in orders:
            if shape_of(s.type) != shape_of(op.results[0].type) or _constant_along_keys(b):
                continue
            if not _softmax_only(op.results[0]):
                return
            kept = _split(b, rewriter, op)
            if kept is None:  # no term of `b` varies along the keys: a shift of the rows, which a softmax ignores
                rewriter.replace(op, [], [s])
            elif kept is not _KEPT:
                rewriter.replace(op, type(op)(s, kept) if s is op.lhs else type(op)(kept, s))
            return
