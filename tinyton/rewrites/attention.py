"""The native parts of the flash-attention pattern (`attention.pdl.mlir`): what PDL cannot say.

`attention_scores(s)` holds when the scores come from `q @ kᵀ` through elementwise steps each used once
(tinyton/analysis/attention.py decides, the same analysis the kernel generator reads back), and
`outline_attention` outlines the matched softmax and second matmul together with that path into one
`tta.fusion` of kind "attention": one flash-attention kernel (tinyton/lowering/fusion/attention.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerAttr, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.attention import score_chain, select_of, softmax_logsumexp
from tinyton.analysis.index_bias import from_indices, index_ops
from tinyton.analysis.strided_views import output_views, stored, strided_view
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of


def attention_scores(s: SSAValue) -> bool:
    return score_chain(s) is not None


def last_axis(value: SSAValue, axis: IntegerAttr) -> bool:
    return axis.value.data == len(shape_of(value.type)) - 1


def outline_attention(matched: Sequence[Operation], kind: StringAttr, s: SSAValue) -> tuple[list[Operation], str]:
    """The matched ops plus the view ops of q (reshapes, transposes: read in place), `q @ kᵀ`, the
    transpose of k, the score steps and the index masks and biases (causal
    masks, ALiBi's distances from `tt.arange`, cloned so that every attention gets its own), k or v selected by an
    index mask from two views (a cache update), the transposes and reshapes that lay the output out
    again (stored through them: `output_views`) and the rows' logsumexp if it is kept: one region."""
    chain = score_chain(s)
    assert chain is not None, "checked by the attention_scores constraint"
    qk, transpose, steps = chain
    masks = [op for step in steps for value in step.others if from_indices(value) for op in own_copy(step.op, value)]
    path = [*strided_view(qk.lhs, windows=True).ops, *([transpose] if transpose is not None else []), *masks, qk, *(step.op for step in steps)]
    k = transpose.input if transpose is not None else qk.rhs
    pv = next(op for op in matched if isinstance(op, tta.MatmulOp))
    layouts = list(dict.fromkeys(op for view in output_views(pv.result) for op in view.ops))
    rmax = next(op for op in matched if isinstance(op, tta.ReduceMaxOp))
    rsum = next(op for op in matched if isinstance(op, tta.ReduceSumOp))
    lse = softmax_logsumexp(rmax.results[0], rsum.results[0]) or ()
    return [*_selected(k), *_selected(pv.rhs), *path, *matched, *layouts, *lse], kind.data


def _selected(operand: SSAValue) -> list[Operation]:
    """The ops of k or v given as `where(index mask, a, b)` (a cache update read in place), the mask
    cloned for this attention; or its reshapes and cast of the array in memory (read as stored)."""
    select = select_of(operand)
    if select is None:
        return list(stored(operand).ops)
    return [*own_copy(select.where, select.where.condition), *select.true.ops, *select.false.ops, select.where]


def own_copy(user: Operation, value: SSAValue) -> list[Operation]:
    """Clone the ops computing index mask or bias `value` before `user`, point `user` at the clone, and erase the
    originals left without users. Returns the clones."""
    originals = index_ops(value)
    mapping: dict[SSAValue, SSAValue] = {}
    clones = []
    for op in originals:
        clone = op.clone()
        for i, operand in enumerate(clone.operands):
            clone.operands[i] = mapping.get(operand, operand)
        Rewriter.insert_op(clone, InsertPoint.before(user))
        mapping.update(zip(op.results, clone.results))
        clones.append(clone)
    user.operands = [mapping.get(v, v) for v in user.operands]
    for op in reversed(originals):
        if all(not r.uses for r in op.results):
            op.detach()
            op.erase()
    return clones
