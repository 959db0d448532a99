"""Is this tta dataflow the backward pass of scaled-dot-product attention, and what are its parts?

The textbook math, as an array program writes it (the forward's scores `s` are tinyton/analysis/attention.py's
`q @ kᵀ` through scale, bias and mask steps):

    p  = softmax(s)  [o = p @ v]         or   p = exp(s - lse)      (lse given: the forward saved it)
    dv = pᵀ @ do
    dp = do @ vᵀ
    ds = p * (dp - rowsum(dp * p))       or   p * (dp - rowsum(do * o))
    dq = (ds @ k) * c                    dk = (dsᵀ @ q) * c

Grouped-query attention broadcasts k and v over the query heads of a group (a size-1 batch axis): their
gradients are then summed over that axis (`.sum(axis, keepdims=...)`). Float casts between the steps (p
computed in float32, cast to the operands' dtype for the products) are looked through: the kernels compute
in float32 whatever the program casts.

The rewrite (tinyton/rewrites/attention_backward.py) outlines what `find_backward` finds into one region
of kind "attention_backward", and the kernel generator (tinyton/lowering/fusion/attention_backward.py)
reads it back from the region with `backward_of`, so a region is only outlined when it can be emitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from math import prod

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.attention import Attention, score_chain
from tinyton.analysis.index_bias import from_indices, index_ops
from tinyton.analysis.index_masks import is_constant
from tinyton.analysis.logsumexp import row_logsumexp
from tinyton.analysis.strided_views import QView, output_views, own_layout, stored, strided_view
from tinyton.analysis.views import VIEWS
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of


@dataclass(frozen=True)
class Gradient:
    """One gradient output: `matmul`, then `ops` (at most one scale by a one-element value, sums over the
    grouped-query axes, float casts), giving `result`."""

    matmul: tta.MatmulOp
    ops: tuple[Operation, ...]
    result: SSAValue
    scale: Operation | None = None
    """The multiplication (or division) of the product by `factor`, if any."""
    factor: SSAValue | None = None
    out: tuple[QView, ...] = ()
    """The arrays the kernel stores `result` to, each through its strides (`output_views`); () for `result`."""

    @property
    def outputs(self) -> tuple[QView, ...]:
        return self.out or (own_layout(self.result),)


@dataclass(frozen=True)
class AttentionBackward:
    scores: Attention
    """q, k, v and the score steps; `softmax` and `pv` (the forward output `o = p @ v`) when the program
    computes the probabilities by a softmax, empty and None when it gives `lse`."""
    lse: SSAValue | None
    """The rows' logsumexp `[..., S_q, 1]` (natural log, of the scaled and masked scores), when given."""
    o: SSAValue
    """The forward output the delta reads (`rowsum(do * o)`, also for `rowsum(dp * p)`): an input or
    `scores.pv`'s result."""
    do: SSAValue
    dq: Gradient
    dk: Gradient
    dv: Gradient
    ops: tuple[Operation, ...]
    """Every op of the backward region (the forward's, the index masks' and the casts' included)."""
    guarded: bool = False
    """The probabilities are `exp(s - lse)` of `tt.logsumexp`'s lse, which is +inf for a row holding +inf
    (p is then NaN only where s is +inf): the forward kernel stores that lse for the backward's p."""
    do_view: QView | None = None
    """`do` read through a strided view of the array in memory (`_read_in_place`); None: `do` as it is."""
    o_view: QView | None = None
    """A given `o` read likewise."""

    @property
    def group_axes(self) -> tuple[int, ...]:
        """Batch axes of q (counted from the left) over which k and v broadcast (grouped-query heads)."""
        return _group_axes(self.scores)

    @property
    def outputs(self) -> list[SSAValue]:
        stored = [view.base for grad in (self.dq, self.dk, self.dv) for view in grad.outputs]
        return list(dict.fromkeys([*([self.scores.pv.result] if self.scores.pv else []), *stored]))


def _strip(value: SSAValue) -> SSAValue:
    """`value` before any float casts."""
    while isinstance(value, OpResult) and isinstance(value.op, tta.CastOp):
        value = value.op.input
    return value


def _casts(value: SSAValue) -> list[Operation]:
    ops = []
    while isinstance(value, OpResult) and isinstance(value.op, tta.CastOp):
        ops.append(value.op)
        value = value.op.input
    return ops


def op_through_casts(value: SSAValue, kind: type | tuple[type, ...]) -> Operation | None:
    """The op of `kind` that computes `value` before any float casts, or None."""
    value = _strip(value)
    return value.op if isinstance(value, OpResult) and isinstance(value.op, kind) else None


def _swaps_last_two(op: Operation | None) -> bool:
    if not isinstance(op, tta.TransposeOp):
        return False
    n = len(op.perm)
    return n >= 2 and op.perm == (*range(n - 2), n - 1, n - 2)


def _last_axis_keepdims(op: Operation, value: SSAValue) -> bool:
    return op.keeps_dims and op.axis.value.data == len(shape_of(value.type)) - 1


def _softmax(p: SSAValue) -> tuple[SSAValue, tuple[Operation, ...], bool] | None:
    """The scores, (max, sub, exp, sum, div) and False when `p` is their softmax over the last axis; the
    scores, the ops and True when `p` is `exp(s - tt.logsumexp(s))` (guarded: analysis/logsumexp.py)."""
    div = op_through_casts(p, tta.DivOp)
    if div is None:
        return _guarded_softmax(p)
    exp, rsum = op_through_casts(div.lhs, tta.ExpOp), op_through_casts(div.rhs, tta.ReduceSumOp)
    sub = op_through_casts(exp.input, tta.SubOp) if exp is not None else None
    if sub is None or rsum is None or rsum.input != exp.result or not _last_axis_keepdims(rsum, exp.result):
        return None
    rmax = op_through_casts(sub.rhs, tta.ReduceMaxOp)
    if rmax is None or rmax.input != sub.lhs or not _last_axis_keepdims(rmax, sub.lhs):
        return None
    return sub.lhs, (rmax, sub, exp, rsum, div), False


def _guarded_softmax(p: SSAValue) -> tuple[SSAValue, tuple[Operation, ...], bool] | None:
    exp = op_through_casts(p, tta.ExpOp)
    sub = op_through_casts(exp.input, tta.SubOp) if exp is not None else None
    found = row_logsumexp(sub.rhs) if sub is not None else None
    if found is None or not found.guarded or found.scores != sub.lhs:
        return None
    return sub.lhs, (*found.ops, sub, exp), True


def _from_lse(p: SSAValue) -> tuple[SSAValue, SSAValue, tuple[Operation, ...]] | None:
    """The scores, the logsumexp and (sub, exp, casts) when `p` is `exp(s - lse)`."""
    exp = op_through_casts(p, tta.ExpOp)
    sub = op_through_casts(exp.input, tta.SubOp) if exp is not None else None
    if sub is None:
        return None
    s, lse = _strip(sub.lhs), _strip(sub.rhs)
    s_shape, lse_shape = shape_of(s.type), shape_of(lse.type)
    if len(lse_shape) != len(s_shape) or lse_shape[-1] != 1 or lse_shape[-2] != s_shape[-2]:
        return None
    return s, lse, (*_casts(sub.lhs), *_casts(sub.rhs), sub, exp, *_casts(exp.result))


def probability_scores(p: SSAValue) -> SSAValue | None:
    """The scores `s` when `p` is attention's probabilities: their softmax, or `exp(s - lse)`."""
    found = _softmax(p) or _from_lse(p)
    return found[0] if found is not None else None


def _tail(matmul: tta.MatmulOp, group: Sequence[int]) -> Gradient | None:
    """The single-use chain after a gradient's product: at most one scale by a one-element value, float
    casts, and sums over exactly the grouped-query axes `group` (axes of the product); None if the chain
    does not sum over all of them."""
    value, ops, scale, factor = matmul.result, [], None, None
    axes, summed = list(range(len(shape_of(value.type)))), set()
    while value.has_one_use():
        user = next(iter(value.uses)).operation
        if isinstance(user, (tta.MulOp, tta.DivOp)) and scale is None:
            other = user.rhs if user.lhs == value else user.lhs
            if prod(shape_of(other.type)) != 1 or (isinstance(user, tta.DivOp) and user.lhs != value):
                break
            scale, factor = user, other
        elif isinstance(user, tta.ReduceSumOp):
            axis = user.axis.value.data
            if axes[axis] not in group:
                break
            summed.add(axes[axis])
            if not user.keeps_dims:
                axes.pop(axis)
        elif not isinstance(user, tta.CastOp):
            break
        ops.append(user)
        value = user.results[0]
    return Gradient(matmul, tuple(ops), value, scale, factor) if summed == set(group) else None


def _single_matmul_user(value: SSAValue) -> tta.MatmulOp | None:
    """The one matmul reading `value` (through casts) as its left operand."""
    found = [op for op in _uses_through_casts(value) if isinstance(op, tta.MatmulOp) and _strip(op.lhs) == value]
    return found[0] if len(found) == 1 else None


def _uses_through_casts(value: SSAValue) -> Iterable[Operation]:
    for use in list(value.uses):
        if isinstance(use.operation, tta.CastOp):
            yield from _uses_through_casts(use.operation.result)
        else:
            yield use.operation


def _transposed_user(value: SSAValue) -> tuple[tta.TransposeOp, tta.MatmulOp] | None:
    """`transpose(value) @ x`: the transpose (of the last two axes) and the matmul."""
    for op in _uses_through_casts(value):
        if _swaps_last_two(op):
            users = list(_uses_through_casts(op.result))
            if len(users) == 1 and isinstance(users[0], tta.MatmulOp) and _strip(users[0].lhs) == op.result:
                return op, users[0]
    return None


def find_backward(ds: tta.MulOp) -> AttentionBackward | None:
    """The attention backward whose `ds = p * (dp - delta)` is `ds`, or None."""
    for p, rest in ((_strip(ds.lhs), ds.rhs), (_strip(ds.rhs), ds.lhs)):
        found = _backward(ds, p, rest)
        if found is not None:
            return found
    return None


def _backward(ds: tta.MulOp, p: SSAValue, rest: SSAValue) -> AttentionBackward | None:
    diff = op_through_casts(rest, tta.SubOp)
    dp_op = op_through_casts(diff.lhs, tta.MatmulOp) if diff is not None else None
    rsum = op_through_casts(diff.rhs, tta.ReduceSumOp) if diff is not None else None
    if dp_op is None or rsum is None or not _last_axis_keepdims(rsum, rsum.input):
        return None
    vt = op_through_casts(dp_op.rhs, tta.TransposeOp)
    if not _swaps_last_two(vt):
        return None
    do, v, dp = dp_op.lhs, vt.input, dp_op.result
    softmax, lse, prob_ops, pv, guarded = _softmax(p), None, (), None, False
    if softmax is not None:
        s, prob_ops, guarded = softmax
        pvs = [op for op in _uses_through_casts(p) if isinstance(op, tta.MatmulOp) and _strip(op.lhs) == p and op.rhs == v]
        pv = pvs[0] if len(pvs) == 1 else None
    else:
        from_lse = _from_lse(p)
        if from_lse is None:
            return None
        s, lse, prob_ops = from_lse
    product = op_through_casts(rsum.input, tta.MulOp)
    if product is None:
        return None
    lhs, rhs = _strip(product.lhs), _strip(product.rhs)
    if {lhs, rhs} == {_strip(dp), p}:
        o = pv.result if pv is not None else None
    elif _strip(do) in (lhs, rhs):
        o = rhs if lhs == _strip(do) else lhs
        if pv is not None and o != pv.result:
            return None
    else:
        return None
    if o is None:
        return None  # rowsum(dp * p) without the forward output: the delta would need its own pass over the keys
    chain = score_chain(s)
    if chain is None:
        return None
    qk, transpose, steps = chain
    if transpose is None:
        return None  # k given as kᵀ: dq = ds @ k would read its transpose
    k, q = transpose.input, qk.lhs
    scores = Attention(strided_view(q), k, True, v, qk, transpose, steps,
                       prob_ops if softmax is not None else (), pv)
    found = _gradients(ds, p, dp_op, vt, rsum, product, diff, scores, lse, o, do, prob_ops)
    return _read_in_place(replace(found, guarded=guarded)) if found is not None else None


def _read_in_place(found: AttentionBackward) -> AttentionBackward:
    """q, k, v, do and a given o read through their strided views of the arrays in memory (windows of one
    projection, heads transposed: nanoGPT's and a Llama block's training step), the view ops joining the region,
    as the forward kernel reads them; no kernel copies them first."""
    members = set(found.ops)
    scores = found.scores
    q = strided_view(scores.qk.lhs, windows=True, readers=members)
    k, v = stored(scores.k, readers=members), stored(scores.v, readers=members)
    do = strided_view(found.do, windows=True, readers=members)
    o = strided_view(found.o, windows=True, readers=members) if found.o is not None and (
        scores.pv is None or found.o != scores.pv.result) else None  # fmt: skip
    views = [q.ops, k.ops, v.ops, do.ops, o.ops if o is not None else ()]
    scores = replace(scores, q=q, k_stored=k if k.ops else None, v_stored=v if v.ops else None)
    grads = _stored_in_place((found.dq, found.dk, found.dv))
    stores = [op for grad in grads for view in grad.out for op in view.ops]
    ops = tuple(dict.fromkeys([*(op for chain in views for op in chain), *found.ops, *stores]))
    return replace(found, scores=scores, ops=ops, do_view=do if do.ops else None,
                   o_view=o if o is not None and o.ops else None, dq=grads[0], dk=grads[1], dv=grads[2])


def _stored_in_place(grads: Sequence[Gradient]) -> list[Gradient]:
    """dq, dk and dv stored in the layouts the program reads them in (`output_views`: heads merged back, and side
    by side in one array when they are concatenated, as a packed qkv projection's gradient); concatenations only
    where the region stores every input of them."""
    for windows in (True, False):
        found = [replace(grad, out=output_views(grad.result, windows)) for grad in grads]
        ends = {view.ops[-2].results[0] if len(view.ops) > 1 else grad.result: view
                for grad in found for view in grad.out if view.ops and isinstance(view.ops[-1], tta.ConcatenateOp)}
        concatenations = {view.ops[-1] for view in ends.values()}
        if all(all(x in ends for x in op.inputs) for op in concatenations):
            return found
    raise AssertionError("unreachable: without windows no view ends in a concatenation")


def _gradients(ds: tta.MulOp, p: SSAValue, dp_op: tta.MatmulOp, vt: tta.TransposeOp, rsum: tta.ReduceSumOp,
               product: tta.MulOp, diff: tta.SubOp, scores: Attention, lse: SSAValue | None, o: SSAValue | None,
               do: SSAValue, prob_ops: tuple[Operation, ...]) -> AttentionBackward | None:
    """The three gradient products reading ds and p, and the region's ops."""
    dq_mm = _single_matmul_user(ds.result)
    dk_found, dv_found = _transposed_user(ds.result), _transposed_user(p)
    if dq_mm is None or dk_found is None or dv_found is None:
        return None
    dk_t, dk_mm = dk_found
    dv_t, dv_mm = dv_found
    dk_q = _strip(dk_mm.rhs)
    if not (same_array(_strip(dq_mm.rhs), scores.k) and same_array(_strip(dv_mm.rhs), do)
            and (dk_q == scores.q.base or same_array(dk_q, scores.qk.lhs))):
        return None
    q, k = scores.q.base, scores.k
    group = _group_axes(scores)
    dq, dk, dv = _tail(dq_mm, ()), _tail(dk_mm, group), _tail(dv_mm, group)
    for grad, like in ((dq, q), (dk, k), (dv, scores.v)):
        if grad is None or prod(shape_of(grad.result.type)) != prod(shape_of(like.type)):
            return None
    ops = [*_casts(ds.lhs), *_casts(ds.rhs), ds, *_casts(diff.lhs), *_casts(diff.rhs), diff, dp_op, vt, rsum,
           *_casts(product.lhs), *_casts(product.rhs), product, dq_mm, *dq.ops, dk_t, dk_mm, *dk.ops, dv_t, dv_mm,
           *dv.ops, *_casts(dq_mm.lhs), *_casts(dk_t.input), *_casts(dv_t.input), *_casts(dq_mm.rhs),
           *_casts(dk_mm.rhs), *_casts(dv_mm.rhs)]
    masks = [op for step in scores.steps for value in step.others if from_indices(value) for op in index_ops(value)]
    forward = [scores.transpose, scores.qk, *(step.op for step in scores.steps), *prob_ops]
    if scores.pv is not None:
        forward.append(scores.pv)
    everything = list(dict.fromkeys([*masks, *forward, *ops]))
    found = AttentionBackward(scores, lse, o, do, dq, dk, dv, tuple(everything))
    return found if _closed(found) else None


def same_array(a: SSAValue, b: SSAValue) -> bool:
    """One value, or the same view (reshape, transpose, broadcast) of the same array written twice:
    `k[:, :, None]` in the scores and again in `ds @ k`. (The rewrite points both at one value.)"""
    if a == b:
        return True
    if not (isinstance(a, OpResult) and isinstance(b, OpResult) and isinstance(a.op, VIEWS)):
        return False
    same_op = type(a.op) is type(b.op) and a.type == b.type and a.op.properties == b.op.properties
    return same_op and same_array(a.op.operands[0], b.op.operands[0])


def _group_axes(scores: Attention) -> tuple[int, ...]:
    """Batch axes of q (counted from the left) over which k and v broadcast (grouped-query heads)."""
    q_batch = scores.q.shape[:-2]
    k_batch = shape_of(scores.k.type)[:-2]
    k_batch = (1,) * (len(q_batch) - len(k_batch)) + tuple(k_batch)
    return tuple(i for i, (a, b) in enumerate(zip(q_batch, k_batch)) if a > 1 and b == 1)


def _closed(found: AttentionBackward) -> bool:
    """Every intermediate is read only inside the region (the outputs and o excepted), q's batch shape is
    the whole batch (k and v broadcast into it, not q into them), and the operands are float."""
    members = set(found.ops)
    outputs = set(found.outputs)
    for op in found.ops:
        for result in op.results:
            if result in outputs or is_constant(result):
                continue
            if any(use.operation not in members for use in result.uses):
                return False
    scores = found.scores
    out_batch = shape_of(found.do.type)[:-2]
    if tuple(scores.q.shape[:-2]) != tuple(out_batch) or tuple(shape_of(scores.qk.result.type)[:-2]) != tuple(out_batch):
        return False
    return all(element_type(v.type) == element_type(scores.q.base.type) for v in (scores.k, scores.v, found.do))


def gradient_concatenations(ops: Sequence[Operation]) -> set[tta.ConcatenateOp]:
    """The concatenations among `ops` of attention gradients only (through transposes and reshapes: a packed qkv
    projection's gradient, dq, dk and dv side by side), which the backward's kernels store in place
    (`_stored_in_place`); the fusion keeps them whole for it rather than turning them into selects."""
    gradients = {grad.result for op in ops if isinstance(op, tta.MulOp) and (found := find_backward(op)) is not None
                 for grad in (found.dq, found.dk, found.dv)}
    return {op for op in ops if isinstance(op, tta.ConcatenateOp) and gradients
            and all(_laid_out_from(x) in gradients for x in op.inputs)}


def _laid_out_from(value: SSAValue) -> SSAValue:
    """`value` before the single-use transposes and reshapes that make it."""
    while isinstance(value, OpResult) and isinstance(value.op, (tta.TransposeOp, tta.ReshapeOp)) and \
            value.op.input.has_one_use():
        value = value.op.input
    return value


def backward_of(ops: Sequence[Operation], results: Sequence[SSAValue]) -> AttentionBackward | None:
    """The attention backward computed by exactly these ops (an outlined region), or None."""
    for op in ops:
        if isinstance(op, tta.MulOp):
            found = find_backward(op)
            if found is not None:
                computed = lambda group: {o for o in group if not isinstance(o, tta.ConstantOp)}
                if computed(found.ops) == computed(ops):
                    return found
    return None
