"""Is this tta dataflow scaled-dot-product attention, and what are its parts?

    s0 = q @ kᵀ                       (kᵀ: `tta.transpose` of k's last two axes, or an input already K×S)
    s  = f(s0, bias, mask, constants)  a chain of elementwise ops, one use each (scale, bias, mask)
    p  = softmax(s, axis=-1)           max, sub, exp, sum, div
    o  = p @ v

The flash-attention rewrite (tinyton/rewrites/attention.py) asks `score_chain` whether the scores feeding
a softmax come from `q @ kᵀ` this way, and the kernel generator (tinyton/lowering/fusion/attention.py)
reads the same structure back from the outlined region with `find_attention`, so the rewrite never outlines
a region the generator cannot emit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of

SCORE_OPS = (tta.AddOp, tta.SubOp, tta.MulOp, tta.DivOp, tta.WhereOp, tta.MaximumOp, tta.MinimumOp, tta.NegOp)
"""Elementwise ops allowed between `q @ kᵀ` and the softmax: scale, bias, masks."""


@dataclass(frozen=True)
class ScoreStep:
    """One elementwise op applied to the scores; `operand` is the position of the scores among its operands."""

    op: Operation
    operand: int


@dataclass(frozen=True)
class Attention:
    q: SSAValue
    k: SSAValue
    """Keys as stored: `(..., S_kv, D)` when `k_transposed`, else `(..., D, S_kv)` (already kᵀ)."""
    k_transposed: bool
    v: SSAValue
    qk: tta.MatmulOp
    transpose: tta.TransposeOp | None
    steps: tuple[ScoreStep, ...]
    softmax: tuple[Operation, ...]
    """reduce_max, sub, exp, reduce_sum, div."""
    pv: tta.MatmulOp

    @property
    def ops(self) -> list[Operation]:
        """Every op of the attention, in program order."""
        first = [self.transpose] if self.transpose is not None else []
        return [*first, self.qk, *(s.op for s in self.steps), *self.softmax, self.pv]

    @property
    def extra_inputs(self) -> list[SSAValue]:
        """Arrays the score steps read besides the scores (bias, mask)."""
        out: list[SSAValue] = []
        for step in self.steps:
            for i, v in enumerate(step.op.operands):
                if i != step.operand and not is_constant(v) and v not in out:
                    out.append(v)
        return out


def is_constant(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, tta.ConstantOp)


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


def find_attention(ops: Sequence[Operation], results: Sequence[SSAValue]) -> Attention | None:
    """The attention computed by exactly these ops (an outlined region), or None."""
    if len(results) != 1:
        return None
    pv = results[0].op if isinstance(results[0], OpResult) else None
    if not isinstance(pv, tta.MatmulOp):
        return None
    div = pv.lhs.op if isinstance(pv.lhs, OpResult) else None
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
    found = Attention(qk.lhs, k, transpose is not None, pv.rhs, qk, transpose, steps, (rmax, sub, exp, rsum, div), pv)
    return found if set(found.ops) == {op for op in ops if not isinstance(op, tta.ConstantOp)} else None


def _last_axis(reduction: tta.ReduceOp, value: SSAValue) -> bool:
    """A reduction over the last axis that keeps it (so the result broadcasts back over the row)."""
    return reduction.axis.value.data == len(shape_of(value.type)) - 1 and reduction.keeps_dims
