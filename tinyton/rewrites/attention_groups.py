"""The grouped-query rule of `tinyton-canonicalize-attention`: k and v repeated over the query heads of
their group become a broadcast, so no kernel copies them, the attention kernel reads each key/value head
once per group, and flash-decoding packs a group's heads into one block.

    kr = np.repeat(k, g, axis=1)   (step-0 slices, concatenated: as the tracer writes a uniform repeat)
    kr = np.broadcast_to(k[:, :, None], (B, H_kv, g, S, D)).reshape(B, H, S, D)
    o  = softmax(q @ kr.mT ...) @ vr
 →
    o  = (softmax(q.reshape(B, H_kv, g, S, D) @ k[:, :, None].mT ...) @ v[:, :, None]).reshape(B, H, S, D)

the form tinyton/analysis/attention.py reads as grouped-query attention (k and v broadcast along a size-1
batch axis). The score steps and the softmax are rebuilt over the grouped batch shape, their other operands
(bias and mask arrays) reshaped to it; a reshape of a contiguous array is read in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from tinyton.analysis.attention import last_axis_max, score_chain
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of


@dataclass(frozen=True)
class Repeated:
    """k or v repeated over the heads of a group: `source` reshaped to `kv_shape` (the grouped batch shape
    with 1 along the group's axis) and broadcast along it is the repeated array, of batch shape `grouped`
    with runs of axes merged."""

    source: SSAValue
    kv_shape: tuple[int, ...]
    grouped: tuple[int, ...]


def _op(value: SSAValue, kind: type) -> Operation | None:
    return value.op if isinstance(value, OpResult) and isinstance(value.op, kind) else None


def _runs(fine: Sequence[int], coarse: Sequence[int]) -> list[list[int]] | None:
    """The consecutive runs of `fine` extents that multiply to each `coarse` extent (trailing size-1 axes
    in the last run), or None when merging runs of `fine` does not give `coarse`."""
    rest, runs = list(fine), []
    for extent in coarse:
        run: list[int] = []
        while rest and prod(run) < extent:
            run.append(rest.pop(0))
        if prod(run) != extent:
            return None
        runs.append(run)
    if any(n != 1 for n in rest) or (rest and not runs):
        return None
    if rest:
        runs[-1] += rest
    return runs


def _broadcast_repeat(value: SSAValue) -> Repeated | None:
    """`broadcast_to(x, (..., g, ...)).reshape(...)`, `x` with 1 along the widened axes."""
    merged = _op(value, tta.ReshapeOp)
    widened = _op(merged.input, tta.BroadcastToOp) if merged is not None else None
    if widened is None:
        return None
    x, grouped = widened.input, shape_of(widened.result.type)
    if len(shape_of(x.type)) != len(grouped) or grouped[-2:] != shape_of(x.type)[-2:]:
        return None
    return Repeated(x, shape_of(x.type), grouped[:-2])


def _sliced_repeat(value: SSAValue) -> Repeated | None:
    """`np.repeat(x, g, axis)`: the step-0 slice of each index of `axis`, in order, concatenated along it."""
    concat = _op(value, tta.ConcatenateOp)
    slices = [_op(part, tta.SliceOp) for part in (concat.inputs if concat is not None else [value])]
    if any(s is None for s in slices) or len({s.input for s in slices}) != 1:
        return None
    x = slices[0].input
    shape = shape_of(x.type)
    axes = [a for a, step in enumerate(slices[0].steps) if step == 0]
    if len(axes) != 1 or axes[0] >= len(shape) - 2 or len(slices) != shape[axes[0]]:
        return None
    axis = axes[0]
    g = shape_of(slices[0].result.type)[axis]
    for h, s in enumerate(slices):
        starts = tuple(h if a == axis else 0 for a in range(len(shape)))
        steps = tuple(0 if a == axis else 1 for a in range(len(shape)))
        if (s.starts, s.steps, shape_of(s.result.type)) != (starts, steps, (*shape[:axis], g, *shape[axis + 1 :])):
            return None
    return Repeated(x, (*shape[: axis + 1], 1, *shape[axis + 1 :]), (*shape[: axis + 1], g, *shape[axis + 1 : -2]))


def repeated(value: SSAValue) -> Repeated | None:
    """`value` as k or v repeated over the heads of a group, or None."""
    found = _broadcast_repeat(value) or _sliced_repeat(value)
    batch = shape_of(value.type)[:-2]
    if found is None or found.grouped == batch or _runs(found.grouped, batch) is None:
        return None
    return found


def _regrouped(value: SSAValue, batch: tuple[int, ...], grouped: tuple[int, ...]) -> tuple[SSAValue, tuple[int, ...]] | None:
    """How k, v, a bias or mask array or a constant of batch shape `batch` is read over `grouped`: an array
    and the shape to reshape it to (repeated k and v: their broadcast form); None when it varies along only
    part of a merged run of axes."""
    found = repeated(value)
    if found is not None and found.grouped == grouped:
        return found.source, found.kv_shape
    shape = shape_of(value.type)
    if len(shape) <= 2:
        return value, shape  # broadcasts over any batch shape
    padded = (1,) * (len(batch) + 2 - len(shape)) + tuple(shape)
    target: list[int] = []
    for run, coarse, extent in zip(_runs(grouped, batch) or (), batch, padded[:-2]):
        if extent != coarse and extent != 1:
            return None
        target += run if extent == coarse else [1] * len(run)
    return value, (*target, *padded[-2:])


def _softmax(p: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """The scores and (max, sub, exp, sum, div) when `p` is their last-axis softmax, each used only there."""
    div = _op(p, tta.DivOp)
    exp = _op(div.lhs, tta.ExpOp) if div is not None else None
    total = _op(div.rhs, tta.ReduceSumOp) if div is not None else None
    sub = _op(exp.input, tta.SubOp) if exp is not None else None
    rmax = _op(sub.rhs, tta.ReduceMaxOp) if sub is not None else None
    if rmax is None or total is None or total.input != exp.result or rmax.input != sub.lhs or not last_axis_max(rmax):
        return None
    if not total.keeps_dims or total.axis.value.data != rmax.axis.value.data:
        return None
    ops = [rmax, sub, exp, total, div]
    inside = set(ops)
    if not all(u.operation in inside for op in ops[:-1] for r in op.results for u in r.uses) or not p.has_one_use():
        return None
    return sub.lhs, ops


class RepeatedKeysToBroadcast(RewritePattern):
    """`softmax(q @ repeat(k)ᵀ ...) @ repeat(v)` → the grouped form: no copies of k and v."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, pv: tta.MatmulOp, rewriter: PatternRewriter) -> None:
        found = _softmax(pv.lhs)
        chain = score_chain(found[0]) if found is not None else None
        if chain is None or chain[1] is None:
            return
        (s, softmax), (qk, transpose, steps) = found, chain
        keys = repeated(transpose.input)
        batch = shape_of(qk.result.type)[:-2]
        if keys is None or shape_of(qk.lhs.type)[:-2] != batch or shape_of(pv.result.type)[:-2] != batch:
            return
        if {use.operation for use in s.uses} != set(softmax[:2]):
            return
        grouped = keys.grouped
        reads = [_regrouped(x, batch, grouped) for x in (transpose.input, pv.rhs, *(x for st in steps for x in st.others))]
        if any(r is None for r in reads):
            return

        def insert(op: Operation) -> SSAValue:
            rewriter.insert(op, InsertPoint.before(pv))
            return op.results[0]

        def reshape(value: SSAValue, shape: Sequence[int]) -> SSAValue:
            return value if shape_of(value.type) == tuple(shape) else insert(tta.ReshapeOp(value, shape))

        k, v, *others = (reshape(value, shape) for value, shape in reads)
        n = len(grouped) + 2
        scores = insert(tta.MatmulOp(reshape(qk.lhs, (*grouped, *shape_of(qk.lhs.type)[-2:])),
                                     insert(tta.TransposeOp(k, (*range(n - 2), n - 1, n - 2)))))
        for step in steps:
            operands = [others.pop(0) for _ in step.others]
            operands.insert(step.operand, scores)
            scores = insert(type(step.op)(*operands))
        e = insert(tta.ExpOp(insert(tta.SubOp(scores, insert(tta.ReduceMaxOp(scores, n - 1, keepdims=True))))))
        p = insert(tta.DivOp(e, insert(tta.ReduceSumOp(e, n - 1, keepdims=True))))
        rewriter.replace(pv, tta.ReshapeOp(insert(tta.MatmulOp(p, v)), shape_of(pv.result.type)))
        for op in [*softmax[::-1], *(step.op for step in steps[::-1]), qk, transpose]:
            rewriter.erase(op)


GROUP_RULES: tuple[RewritePattern, ...] = (RepeatedKeysToBroadcast(),)
