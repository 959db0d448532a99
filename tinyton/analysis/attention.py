"""Is this tta dataflow scaled-dot-product attention, and what are its parts?

    s0 = q @ kᵀ                       (kᵀ: `tta.transpose` of k's last two axes, or an input already K×S;
                                       q: an array, or a strided view of one by reshapes and transposes)
    s  = f(s0, bias, mask, constants)  a chain of elementwise ops, one use each (scale, bias, mask)
    p  = softmax(s, axis=-1)           max, sub, exp, sum, div
    o  = p @ v                         or p.astype(v.dtype) @ v (float8 v: FlashAttention-3's e4m3 P)

Index masks (index_masks.py) are computed in the kernel from the block's indices and one-element integer inputs (a decode
step's `arange(T) <= pos`); k and v may each be `where(index mask, a, b)` of two views (the new row written
into the KV cache), read as two loads and a select (`Select`).

The flash-attention rewrite (tinyton/rewrites/attention.py) asks `score_chain` whether the scores feeding
a softmax come from `q @ kᵀ` this way, and the kernel generator (tinyton/lowering/fusion/attention.py)
reads the same structure back from the outlined region with `find_attention`, so the rewrite never outlines
a region the generator cannot emit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.index_bias import from_indices, index_ops
from tinyton.analysis.index_masks import (
    Affine,
    Mask,
    causal_offset,
    index_mask,
    is_constant,
    is_minus_inf,
    key_limit,
    mask_ops,
)
from tinyton.analysis.strided_views import QView, Stored, output_views, own_layout, stored, strided_view
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, is_float, shape_of

SCORE_OPS = (tta.AddOp, tta.SubOp, tta.MulOp, tta.DivOp, tta.WhereOp, tta.MaximumOp, tta.MinimumOp, tta.NegOp)
"""Elementwise ops allowed between `q @ kᵀ` and the softmax: scale, bias, masks."""


@dataclass(frozen=True)
class ScoreStep:
    """One elementwise op applied to the scores; `operand` is the position of the scores among its operands."""

    op: Operation
    operand: int

    @property
    def others(self) -> list[SSAValue]:
        """The step's other operands: constants, bias or mask arrays, index masks."""
        return [v for i, v in enumerate(self.op.operands) if i != self.operand]


def softmax_logsumexp(m: SSAValue, total: SSAValue) -> tuple[Operation, ...] | None:
    """The ops of `m + log(total)` (then single-use reshapes and float casts) when that is the only use of a softmax's
    row max `m` and row sum `total` besides the softmax itself: the rows' logsumexp, which a training step's forward
    keeps for its backward (the attention kernel stores it beside the output). None otherwise."""
    logs = [u.operation for u in total.uses if isinstance(u.operation, tta.LogOp)]
    adds = [u.operation for u in m.uses if isinstance(u.operation, tta.AddOp)]
    if len(list(total.uses)) != 2 or len(list(m.uses)) != 2 or len(logs) != 1 or len(adds) != 1:
        return None
    log, add = logs[0], adds[0]
    if not log.result.has_one_use() or set(add.operands) != {m, log.result}:
        return None
    ops, value = [log, add], add.result
    while value.has_one_use() and (isinstance(user := next(iter(value.uses)).operation, tta.ReshapeOp) or isinstance(
            user, tta.CastOp) and is_float(element_type(user.result.type))):  # fmt: skip
        ops.append(user)
        value = user.results[0]
    return tuple(ops)


def softmax_statistics(m: SSAValue, total: SSAValue) -> bool:
    """Whether a softmax's row max and row sum are used only by it, or also by its logsumexp (`softmax_logsumexp`)."""
    return m.has_one_use() and total.has_one_use() or softmax_logsumexp(m, total) is not None


@dataclass(frozen=True)
class Select:
    """k or v given as `where(mask, a, b)`: an index mask over its last two axes choosing between two
    strided views (a decode step's new row and its cache), read by the kernel as two loads and a select
    instead of a kernel of its own that writes the updated cache."""

    where: tta.WhereOp
    mask: Mask
    true: QView
    false: QView

    @property
    def ops(self) -> list[Operation]:
        return [*mask_ops(self.where.condition), *self.true.ops, *self.false.ops, self.where]


def select_of(value: SSAValue) -> Select | None:
    """`value` as a `Select`, or None (not a `where` used once, a condition that is no index mask)."""
    if not (isinstance(value, OpResult) and isinstance(value.op, tta.WhereOp) and value.has_one_use()):
        return None
    op = value.op
    mask = index_mask(op.condition)
    if mask is None or is_constant(op.true_value) or is_constant(op.false_value):
        return None
    return Select(op, mask, strided_view(op.true_value), strided_view(op.false_value))


@dataclass(frozen=True)
class Attention:
    q: QView
    k: SSAValue
    """Keys as stored: `(..., S_kv, D)` when `k_transposed`, else `(..., D, S_kv)` (already kᵀ)."""
    k_transposed: bool
    v: SSAValue
    qk: tta.MatmulOp
    transpose: tta.TransposeOp | None
    steps: tuple[ScoreStep, ...]
    softmax: tuple[Operation, ...]
    """reduce_max, sub, exp, reduce_sum, div."""
    pv: tta.MatmulOp | None
    """`p @ v`; None only in a backward that is given the logsumexp (analysis/attention_backward.py)."""
    p_cast: tta.CastOp | None = None
    """The cast of the probabilities to v's element type before `p @ v` (spelled out: the kernel casts anyway)."""
    k_select: Select | None = None
    v_select: Select | None = None
    k_stored: Stored | None = None
    """k read through reshapes and a cast of the array in memory (None: k is the array, or a `k_select`)."""
    v_stored: Stored | None = None
    out: tuple[QView, ...] = ()
    """The arrays the kernel stores `p @ v` to (`output_views`), each through its strides; () for `p @ v` itself."""
    lse: tuple[Operation, ...] = ()
    """The ops of the rows' logsumexp when the region returns it too (`softmax_logsumexp`); its last op's result."""

    @property
    def ops(self) -> list[Operation]:
        """Every op of the attention (index masks and selected k/v included)."""
        selects = [op for sel in (self.k_select, self.v_select) if sel is not None for op in sel.ops]
        selects += [op for st in (self.k_stored, self.v_stored) if st is not None for op in st.ops]
        first = [*selects, *self.q.ops, *([self.transpose] if self.transpose is not None else [])]
        masks = [op for step in self.steps for v in step.others if from_indices(v) for op in index_ops(v)]
        last = [op for op in (self.p_cast, self.pv, *(op for view in self.out for op in view.ops)) if op is not None]
        return [*first, *masks, self.qk, *(s.op for s in self.steps), *self.softmax, *last, *self.lse]

    @property
    def outputs(self) -> tuple[QView, ...]:
        """The arrays the kernel stores `p @ v` to (`out`, or `p @ v` itself)."""
        assert self.pv is not None, "a forward attention"
        return self.out or (own_layout(self.pv.result),)

    @property
    def lse_result(self) -> SSAValue | None:
        return self.lse[-1].results[0] if self.lse else None

    @property
    def causal_step(self) -> ScoreStep | None:
        """The step `where(keep, s, -inf)` whose index mask keeps exactly the keys `j <= i + c`."""
        return next((step for step, mask in self._minus_inf_masks() if causal_offset(mask) is not None), None)

    @property
    def key_limit(self) -> Affine | None:
        """The last key kept when a step `where(keep, s, -inf)` keeps the keys `j <= limit` of every query, the
        limit computed from one-element inputs (a decode step's position: the KV loop stops there)."""
        return next((key_limit(mask) for _, mask in self._minus_inf_masks() if key_limit(mask) is not None), None)

    def _minus_inf_masks(self) -> list[tuple[ScoreStep, Mask]]:
        """The steps `where(keep, s, -inf)` of an index mask `keep`, with it."""
        found = []
        for step in self.steps:
            if isinstance(step.op, tta.WhereOp) and step.operand == 1 and is_minus_inf(step.op.false_value):
                mask = index_mask(step.op.condition)
                if mask is not None:
                    found.append((step, mask))
        return found

    @property
    def causal_offset(self) -> int | None:
        """`c` when a step masks the scores to the keys `j <= i + c` (the KV loop then stops there)."""
        step = self.causal_step
        if step is None:
            return None
        mask = index_mask(step.op.condition)
        assert mask is not None
        return causal_offset(mask)


def _single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def _swaps_last_two(op: tta.TransposeOp) -> bool:
    perm = op.perm
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


def score_chain(s: SSAValue) -> tuple[tta.MatmulOp, tta.TransposeOp | None, tuple[ScoreStep, ...]] | None:
    """The `q @ kᵀ` matmul the scores `s` come from, the transpose of k (if any) and the steps between;
    None when `s` is not computed that way (another op, a step used twice, a mask that reads the scores)."""
    steps: list[ScoreStep] = []
    value = s
    while not (isinstance(value, OpResult) and isinstance(value.op, tta.MatmulOp)):
        if not isinstance(value, OpResult) or not isinstance(value.op, SCORE_OPS):
            return None
        op = value.op
        positions = [i for i, v in enumerate(op.operands) if shape_of(v.type) == shape_of(value.type)
                     and not is_constant(v) and _depends_on_matmul(v)]
        if len(positions) != 1 or (steps and not _single_use(value)):
            return None
        if isinstance(op, tta.WhereOp) and positions[0] == 0:
            return None  # the scores chose the mask: not a masking of the scores
        steps.append(ScoreStep(op, positions[0]))
        value = op.operands[positions[0]]
    qk = value.op
    if steps and not _single_use(value):
        return None
    if len(shape_of(qk.lhs.type)) < 2 or len(shape_of(qk.rhs.type)) < 2:
        return None
    kt = qk.rhs
    transpose = kt.op if isinstance(kt, OpResult) and isinstance(kt.op, tta.TransposeOp) else None
    if transpose is not None and not (_swaps_last_two(transpose) and _single_use(kt)):
        transpose = None  # some other permutation: read the permuted array as an input
    return qk, transpose, tuple(reversed(steps))


def _depends_on_matmul(value: SSAValue, budget: int = 64) -> bool:
    """Whether `value` is computed from a tta.matmul through elementwise score ops (a short walk)."""
    pending = [value]
    while pending and budget:
        budget -= 1
        v = pending.pop()
        if not isinstance(v, OpResult):
            continue
        if isinstance(v.op, tta.MatmulOp):
            return True
        if isinstance(v.op, SCORE_OPS):
            pending.extend(v.op.operands)
    return False


def last_axis_max(op: Operation) -> bool:
    """A `reduce_max` over the last axis that keeps it: the first op of a softmax."""
    return isinstance(op, tta.ReduceMaxOp) and op.keeps_dims and op.axis.value.data == len(shape_of(op.input.type)) - 1


def feeds_softmax(value: SSAValue, budget: int = 16) -> bool:
    """Whether `value` reaches the input of a softmax (a last-axis `reduce_max` of it) through score steps
    (scale, bias, masks), each the only user of the value before it: scores, whose rewrites (the attention
    canonicalization) leave the rounding of every other program NumPy's."""
    while budget:
        budget -= 1
        users = [u.operation for u in value.uses]
        if any(last_axis_max(user) for user in users):
            return True
        if len(users) != 1 or not isinstance(users[0], SCORE_OPS) or shape_of(users[0].results[0].type) != shape_of(value.type):
            return False
        value = users[0].results[0]
    return False


def find_attention(ops: Sequence[Operation], results: Sequence[SSAValue]) -> Attention | None:
    """The attention computed by exactly these ops (an outlined region) whose results are `p @ v` in the layouts
    it is stored in (`output_views`) and, if kept, its rows' logsumexp; or None."""
    for result in results:
        value = result
        while isinstance(value, OpResult) and isinstance(value.op, (tta.TransposeOp, tta.ReshapeOp)):
            value = value.op.input
        if not (isinstance(value, OpResult) and isinstance(value.op, tta.MatmulOp)):
            continue
        found = _attention_of(value.op)
        if found is None:
            continue
        lse = softmax_logsumexp(found.softmax[0].results[0], found.softmax[3].results[0]) or ()
        found = replace(found, out=output_views(value), lse=lse)
        stored = {view.base for view in found.out} | ({found.lse_result} if lse else set())
        computed = lambda group: {op for op in group if not isinstance(op, tta.ConstantOp)}  # noqa: E731
        return found if stored == set(results) and computed(found.ops) == computed(ops) else None
    return None


def _attention_of(pv: tta.MatmulOp) -> Attention | None:
    """The attention whose `p @ v` is `pv` (no output layouts or logsumexp yet), or None."""
    p_cast = pv.lhs.op if isinstance(pv.lhs, OpResult) and isinstance(pv.lhs.op, tta.CastOp) else None
    if p_cast is not None and element_type(p_cast.result.type) != element_type(pv.rhs.type):
        return None
    p = p_cast.input if p_cast is not None else pv.lhs
    div = p.op if isinstance(p, OpResult) else None
    if not isinstance(div, tta.DivOp):
        return None
    e, total = div.lhs, div.rhs
    exp, rsum = e.op if isinstance(e, OpResult) else None, total.op if isinstance(total, OpResult) else None
    if not isinstance(exp, tta.ExpOp) or not isinstance(rsum, tta.ReduceSumOp) or rsum.input != e:
        return None
    sub = exp.input.op if isinstance(exp.input, OpResult) else None
    if not isinstance(sub, tta.SubOp):
        return None
    s, m = sub.lhs, sub.rhs
    rmax = m.op if isinstance(m, OpResult) else None
    if not isinstance(rmax, tta.ReduceMaxOp) or rmax.input != s:
        return None
    if not (_last_axis(rmax, s) and _last_axis(rsum, e)):
        return None
    chain = score_chain(s)
    if chain is None:
        return None
    qk, transpose, steps = chain
    k = transpose.input if transpose is not None else qk.rhs
    k_select, v_select = select_of(k), select_of(pv.rhs)
    return Attention(strided_view(qk.lhs, windows=True), k, transpose is not None, pv.rhs, qk, transpose, steps,
                     (rmax, sub, exp, rsum, div), pv, p_cast, k_select, v_select,
                     stored(k) if k_select is None else None, stored(pv.rhs) if v_select is None else None)  # fmt: skip


def _last_axis(reduction: tta.ReduceOp, value: SSAValue) -> bool:
    """A reduction over the last axis that keeps it (so the result broadcasts back over the row)."""
    return reduction.axis.value.data == len(shape_of(value.type)) - 1 and reduction.keeps_dims
