"""The grouped-query rule of `tinyton-canonicalize-attention`: k and v repeated over the query heads of
their group become a broadcast, so no kernel copies them, the attention kernel reads each key/value head
once per group, and flash-decoding packs a group's heads into one block.

    kr = np.repeat(k, g, axis=1)   (step-0 slices, concatenated: as the tracer writes a uniform repeat)
    kr = np.broadcast_to(k[:, :, None], (B, H_kv, g, S, D)).reshape(B, H, S, D)
    o  = softmax(q @ kr.mT ...) @ vr
 →
    o  = (softmax(q.reshape(B, H_kv, g, S, D) @ k[:, :, None].mT ...) @ v[:, :, None]).reshape(B, H, S, D)

the form tinyton/analysis/attention.py (and attention_backward.py) reads as grouped-query attention: k and v
broadcast along a size-1 batch axis. Every op computing per batch entry around the scores (the score steps,
the softmax, `p @ v`, and in a training step the backward's products, `ds` and the gradients) is rebuilt
over the grouped batch shape, the same arithmetic on the same elements; the arrays it reads are reshaped to
that shape and its results back (a reshape of a contiguous array is read in place; a gradient the program
reshapes to the grouped shape itself, to sum over the group, is used as it is). An index bias (ALiBi's
`slopes * (j - i)`, tinyton/analysis/index_bias.py) is rebuilt over the grouped shape from its slopes reshaped,
so that the kernel still computes it from the indices (a reshape of the `[H, S, S]` bias would be an array).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i64
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from tinyton.analysis.attention import feeds_softmax
from tinyton.analysis.index_bias import bias_ops, index_bias
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.dialects.tta_shapes import array_type, broadcast_shapes


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


def _regrouped(value: SSAValue, batch: tuple[int, ...], grouped: tuple[int, ...]
               ) -> tuple[SSAValue, tuple[int, ...]] | None:
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


def _per_batch_entry(op: Operation, batch: tuple[int, ...]) -> bool:
    """Whether `op` computes each entry of batch shape `batch` from that entry alone (elementwise ops,
    matmuls, transposes and reductions of the last two axes), its results `(*batch, M, N)`."""
    if not isinstance(op, _PER_ENTRY) or isinstance(op, tta.ArgReduceOp):
        return False
    if any(len(shape_of(r.type)) != len(batch) + 2 or shape_of(r.type)[:-2] != batch for r in op.results):
        return False
    if isinstance(op, tta.TransposeOp):
        return op.perm[: len(batch)] == tuple(range(len(batch)))
    if isinstance(op, tta.ReduceOp):
        return op.axis.value.data >= len(batch) and op.keeps_dims
    if isinstance(op, tta.MatmulOp):
        return all(len(shape_of(v.type)) >= 2 for v in op.operands)
    return True


_PER_ENTRY = (tta.BinaryOp, tta.UnaryOp, tta.CmpOp, tta.WhereOp, tta.CastOp, tta.MatmulOp, tta.TransposeOp,
              tta.ReduceOp)
_ELEMENTWISE = (tta.BinaryOp, tta.UnaryOp, tta.CastOp)
"""The steps of an index bias rebuilt over grouped heads (`_grouped_bias`)."""


def _members(seed: Operation, batch: tuple[int, ...]) -> list[Operation]:
    """The ops connected to `seed` through values of batch shape `batch`, each computing per batch entry,
    in program order."""
    members, stack = {seed}, [seed]
    while stack:
        op = stack.pop()
        neighbours = [u.operation for r in op.results for u in r.uses]
        neighbours += [v.op for v in op.operands if isinstance(v, OpResult)]
        for other in neighbours:
            if other not in members and other.parent_block() is seed.parent_block() and _per_batch_entry(other, batch):
                members.add(other)
                stack.append(other)
    block = seed.parent_block()
    assert block is not None
    return [op for op in block.ops if op in members]


def _grouped_op(op: Operation, operands: Sequence[SSAValue], batch: tuple[int, ...], grouped: tuple[int, ...]
                ) -> Operation:
    """`op` over the grouped batch shape, reading `operands`."""
    properties = dict(op.properties)
    shift = len(grouped) - len(batch)
    if isinstance(op, tta.TransposeOp):
        perm = (*range(len(grouped)), *(p + shift for p in op.perm[len(batch) :]))
        properties["permutation"] = DenseArrayBase.from_list(i64, list(perm))
    if isinstance(op, tta.ReduceOp):
        properties["axis"] = IntegerAttr(op.axis.value.data + shift, 32)
    batches = [shape_of(v.type)[:-2] for v in operands if len(shape_of(v.type)) > 2]
    entries = broadcast_shapes(*((1,) * (len(grouped) - len(b)) + tuple(b) for b in batches))  # k: 1 per group
    types = [array_type(element_type(r.type), (*entries, *shape_of(r.type)[-2:])) for r in op.results]
    return type(op).create(operands=operands, result_types=types, properties=properties, attributes=dict(op.attributes))


def _reshaped(value: SSAValue, shape: Sequence[int], at: InsertPoint, rewriter: PatternRewriter) -> SSAValue:
    reshape = tta.ReshapeOp(value, shape)
    rewriter.insert(reshape, at)
    return reshape.result


def _grouped_bias(value: SSAValue, batch: tuple[int, ...], grouped: tuple[int, ...], at: InsertPoint,
                  rewriter: PatternRewriter) -> SSAValue | None:
    """Index bias `value` computed over the grouped batch shape: its elementwise steps with batch axes rebuilt on
    their operands regrouped (the slopes reshaped), those without (the indices' arithmetic) read as they are; None,
    nothing inserted, when `value` is no index bias, a step with batch axes is not elementwise or an operand cannot
    be regrouped."""
    if not index_bias(value):
        return None
    steps = [op for op in bias_ops(value) if any(len(shape_of(r.type)) > 2 for r in op.results)]
    if any(not isinstance(op, _ELEMENTWISE) for op in steps):
        return None
    computed = {r for op in steps for r in op.results}
    leaves = {v: _regrouped(v, batch, grouped) for op in steps for v in op.operands if v not in computed}
    if any(found is None for found in leaves.values()):
        return None
    new: dict[SSAValue, SSAValue] = {}
    for leaf, (source, shape) in leaves.items():
        new[leaf] = source if shape_of(source.type) == tuple(shape) else _reshaped(source, shape, at, rewriter)
    for op in steps:
        grouped_op = _grouped_op(op, [new[v] for v in op.operands], batch, grouped)
        rewriter.insert(grouped_op, at)
        new.update(zip(op.results, grouped_op.results))
    return new[value]


class RepeatedKeysToBroadcast(RewritePattern):
    """Scores `q @ repeat(k)ᵀ` and every per-batch-entry op around them → the grouped form (no copies of k
    and v)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, qk: tta.MatmulOp, rewriter: PatternRewriter) -> None:
        kt = qk.rhs
        transpose = _op(kt, tta.TransposeOp)
        keys = repeated(transpose.input if transpose is not None else kt)
        batch = shape_of(qk.result.type)[:-2]
        if keys is None or shape_of(qk.lhs.type)[:-2] != batch or not feeds_softmax(qk.result):
            return
        grouped = keys.grouped
        members = _members(qk, batch)
        inside = set(members)
        reads = {v: _regrouped(v, batch, grouped) for op in members for v in op.operands
                 if not (isinstance(v, OpResult) and v.op in inside)}
        if any(r is None for r in reads.values()):
            return
        new: dict[SSAValue, SSAValue] = {}
        for value, (source, shape) in reads.items():
            new[value] = source
            if shape_of(source.type) != tuple(shape):
                at = InsertPoint.before(members[0])
                bias = _grouped_bias(value, batch, grouped, at, rewriter)
                new[value] = bias or _reshaped(source, shape, at, rewriter)
        for op in members:
            grouped_op = _grouped_op(op, [new[v] for v in op.operands], batch, grouped)
            rewriter.insert(grouped_op, InsertPoint.before(op))
            new.update(zip(op.results, grouped_op.results))
        for op in members:
            for old in op.results:
                self._read_outside(old, new[old], grouped, inside, rewriter)
        for op in reversed(members):
            rewriter.erase(op)

    @staticmethod
    def _read_outside(old: SSAValue, value: SSAValue, grouped: tuple[int, ...], inside: set[Operation],
                      rewriter: PatternRewriter) -> None:
        """Point the users of `old` outside the rebuilt ops at `value`: a reshape to its grouped shape
        directly, the others through a reshape back (after a broadcast, for a value of one head per group)."""
        back: SSAValue | None = None
        for use in list(old.uses):
            user = use.operation
            if user in inside:
                continue
            if isinstance(user, tta.ReshapeOp) and shape_of(user.result.type) == shape_of(value.type):
                rewriter.replace_all_uses_with(user.result, value)
                rewriter.erase(user)
                continue
            if back is None:
                shape = (*grouped, *shape_of(old.type)[-2:])
                full = tta.BroadcastToOp(value, shape) if shape_of(value.type) != shape else None
                reshape = tta.ReshapeOp(full.result if full is not None else value, shape_of(old.type))
                rewriter.insert(reshape, InsertPoint.after(value.op))
                if full is not None:  # built only when inserted: a detached op would still count as a reader
                    rewriter.insert(full, InsertPoint.after(value.op))
                back = reshape.result
            user.operands[use.index] = back


GROUP_RULES: tuple[RewritePattern, ...] = (RepeatedKeysToBroadcast(),)
