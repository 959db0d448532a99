"""`tinyton-push-layouts`: layout ops of computed values moved onto the values read from memory.

Takes: a module of `func.func`s of tta ops. Gives: the same functions computing the same values, where a
`tta.transpose` that keeps the last dim (heads split or merged), or a `tta.reshape` merging adjacent dims of a value
that is then reduced, of a computed value that is its only reader, is moved onto the operands of the op computing
that value (through elementwise ops, broadcasts, transposes, squeezes and reductions), as `tinyton-push-slices`
moves slices (rewrites/remap.py). The fusion reads layout ops of memory as strided views, but a layout op of a
value computed in registers needs memory (tinyton/analysis/domain.py): moved, the computation runs, and stores its
result, in that layout, where a kernel of its own copied it (RoPE's backward merged into heads for the projections'
gradients; dk and dv summed over k and v repeated by hand) or it was stored for a reduction over the merged dims (a
norm weight's gradient, summed over batch and sequence). `.mT`, which products read as it is, stays; so does a
merging reshape whose value is not reduced (a matmul's epilogue reads the product in its own shape). The other way,
a reshape splitting a computed value's dims (a linear layer's product `[B * T, N]` viewed as `[B, T, N]`) moves
down, below its elementwise readers, so that an activation or a residual runs in the product's epilogue; it is left
where the value is stored (the same bytes) or read by what needs the split shape. Run after the patterns, which
read q, k and v through their transposes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.rewrites.outline import functions
from tinyton.rewrites.remap import ELEMENTWISE, Builder, push_all, recomputed


def _transposed(b: Builder, value: SSAValue, perm: Sequence[int]) -> SSAValue:
    """`value` broadcast (NumPy, trailing dims) into a result of rank `len(perm)`, transposed by `perm`: its
    missing leading dims added as size-1 dims first; a scalar as it is."""
    shape = shape_of(value.type)
    if not shape:
        return value
    full = (1,) * (len(perm) - len(shape)) + tuple(shape)
    padded = value if full == tuple(shape) else b.add(tta.ReshapeOp(value, full))
    if list(perm) == sorted(perm):
        return padded
    return b.add(tta.TransposeOp(padded, list(perm)))


def _merged_runs(src: Sequence[int], out: Sequence[int]) -> list[tuple[int, int]] | None:
    """The runs `(first, last)` of `src`'s dims whose products are `out`'s dims, when `out` merges adjacent dims of
    `src` and merges some (a reshape moving size-1 dims only is free in registers); None for any other reshape. A
    size-1 dim of `out` where `src` has none is an empty run (`last < first`: a convolution's single group of
    `[B, 1, C, H * W]` is `[B, C, H, W]` merged)."""
    runs, i = [], 0
    for n in out:
        first, size = i, 1
        if n == 1 and (i == len(src) or src[i] != 1):
            runs.append((first, first - 1))
            continue
        while i < len(src) and (size < n or i == first):
            size, i = size * src[i], i + 1
        if size != n or n == 0:
            return None
        runs.append((first, i - 1))
    return runs if i == len(src) and any(last > first for first, last in runs) else None


def _merged_shape(shape: Sequence[int], src: Sequence[int], runs: list[tuple[int, int]]) -> tuple[int, ...] | None:
    """The shape of an operand of `shape`, broadcast (NumPy, trailing dims) into `src`, with the dims of each run
    merged: a run it holds whole or broadcasts whole; None when it broadcasts part of a run."""
    padded = (1,) * (len(src) - len(shape)) + tuple(shape)
    merged = []
    for first, last in runs:
        part = padded[first : last + 1]
        if part != tuple(src[first : last + 1]) and any(d != 1 for d in part):
            return None
        merged.append(prod(part))
    return tuple(merged)


def _feeds_reduction(value: SSAValue) -> bool:
    """Whether `value` is reduced, through elementwise ops each its only reader's."""
    while value.uses.get_length() == 1:
        user = next(iter(value.uses)).operation
        if isinstance(user, tta.ReduceOp):
            return True
        if not isinstance(user, ELEMENTWISE):
            return False
        value = user.results[0]
    return False


def push_reshape(op: tta.ReshapeOp) -> bool:
    """Move reshape `op`, merging adjacent dims, above the elementwise op or broadcast computing its input when it
    is that value's only reader and what it gives is reduced (a sum over batch and sequence of a computed value,
    `tinyton.frontend`'s one reduction of the merged axes; a reshape before a matmul's epilogue stays where the
    epilogue reads the product); True if rewritten."""
    source, out = op.input, shape_of(op.result.type)
    if not isinstance(source, OpResult) or source.uses.get_length() != 1 or not _feeds_reduction(op.result):
        return False
    producer, src = source.op, shape_of(source.type)
    runs = _merged_runs(src, out)
    if runs is None or not isinstance(producer, (*ELEMENTWISE, tta.BroadcastToOp)):
        return False
    shapes = [_merged_shape(shape_of(v.type), src, runs) if shape_of(v.type) else () for v in producer.operands]
    if None in shapes:
        return False
    b = Builder(op)
    operands = [v if s in ((), shape_of(v.type)) else b.add(tta.ReshapeOp(v, s))
                for v, s in zip(producer.operands, shapes)]
    if isinstance(producer, tta.BroadcastToOp):
        value = b.broadcast(operands[0], out)
    else:
        value = recomputed(b, producer, operands, out)
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)
    Rewriter.erase_op(producer)
    return True


def sink_reshape(op: tta.ReshapeOp) -> bool:
    """Move reshape `op`, splitting dims of a computed value (a product's rows into batch and sequence, as
    `nn.Linear` on `[B, T, C]` gives), below an elementwise reader of the same shape, whose other operands are
    merged alike: the reader (an activation, a residual) then runs in the product's shape, in its epilogue, and
    the reshape is left where the value is stored or read from memory (a reshape of a reshape, which moving
    readers one at a time leaves, made one); True if rewritten."""
    source, out = op.input, shape_of(op.result.type)
    if isinstance(source, OpResult) and isinstance(source.op, tta.ReshapeOp):  # a reshape of a reshape: one
        value = source.op.input
        if tuple(shape_of(value.type)) != tuple(out):
            value = Builder(op).add(tta.ReshapeOp(value, out))
        op.result.replace_all_uses_with(value)
        Rewriter.erase_op(op)
        return True
    src = shape_of(source.type)
    runs = _merged_runs(out, src)
    if not isinstance(source, OpResult) or runs is None or [d for d in out if d != 1] == [d for d in src if d != 1]:
        return False  # moving size-1 dims only is free in registers
    for user in dict.fromkeys(u.operation for u in op.result.uses):
        if isinstance(user, ELEMENTWISE) and shape_of(user.results[0].type) == out:
            shapes = [_merged_shape(shape_of(v.type), out, runs) if shape_of(v.type) else () for v in user.operands]
            free = (v is op.result or (s is not None and _free_to_merge(v, s)) for v, s in zip(user.operands, shapes))
            if all(free):
                _sink_below(op, user, shapes)
                return True
    return False


def _sink_below(op: tta.ReshapeOp, user: Operation, shapes: list[tuple[int, ...]]) -> None:
    """`user` of reshape `op`'s result computed on `op`'s input (its other operands in `shapes`), then reshaped."""
    source, out = op.input, shape_of(op.result.type)
    b = Builder(user)
    operands = [source if v is op.result else _reshaped(b, v, s) for v, s in zip(user.operands, shapes)]
    value = b.add(tta.ReshapeOp(recomputed(b, user, operands, shape_of(source.type)), out))
    user.results[0].replace_all_uses_with(value)
    Rewriter.erase_op(user)
    if not op.result.uses:
        Rewriter.erase_op(op)


def _free_to_merge(value: SSAValue, shape: tuple[int, ...]) -> bool:
    """Whether `value` takes `shape` at no cost: moving size-1 dims only, undoing a reshape, or a contiguous array
    read from memory (a transposed or broadcast one merged may need a copy). A value computed beside it (a norm's row
    statistics) stays as it is, and so does the reader: its kernel would otherwise read the same rows in two shapes."""
    if [d for d in shape if d != 1] == [d for d in shape_of(value.type) if d != 1]:
        return True
    if _reshaped_from(value) == shape:
        return True
    while isinstance(value, OpResult) and isinstance(value.op, tta.ReshapeOp):
        value = value.op.input
    return not isinstance(value, OpResult)


def _reshaped_from(value: SSAValue) -> tuple[int, ...] | None:
    """The shape a reshape made `value` from, None where no reshape made it."""
    if isinstance(value, OpResult) and isinstance(value.op, tta.ReshapeOp):
        return tuple(shape_of(value.op.input.type))
    return None


def _reshaped(b: Builder, value: SSAValue, shape: tuple[int, ...]) -> SSAValue:
    """`value` in `shape` (a scalar as it is): a reshape, or the value a reshape made it from."""
    if shape in ((), tuple(shape_of(value.type))):
        return value
    if _reshaped_from(value) == shape:
        return value.op.input
    return b.add(tta.ReshapeOp(value, shape))


def push_transpose(op: tta.TransposeOp) -> bool:
    """Move transpose `op` above the elementwise op, broadcast, transpose or reduction computing its input, when
    `op` is that value's only reader and keeps the last dim last (a head split or merge; `.mT`, a product's
    operand, stays where the attention and matmul forms read it), or above a take (any permutation that keeps the
    indices' dims together: `_transpose_table`); True if rewritten."""
    source, perm = op.input, list(op.perm)
    if not isinstance(source, OpResult) or source.uses.get_length() != 1:
        return False
    producer, b = source.op, Builder(op)
    if isinstance(producer, tta.TakeOp):
        return _transpose_table(op, producer)
    if perm[-1] != len(perm) - 1:
        return False
    out = shape_of(op.result.type)
    if isinstance(producer, ELEMENTWISE):
        value = recomputed(b, producer, [_transposed(b, v, perm) for v in producer.operands], out)
    elif isinstance(producer, tta.BroadcastToOp):
        value = b.broadcast(_transposed(b, producer.input, perm), out)
    elif isinstance(producer, tta.TransposeOp):
        composed = [producer.perm[p] for p in perm]
        value = producer.input if composed == sorted(composed) else b.add(tta.TransposeOp(producer.input, composed))
    elif isinstance(producer, tta.ReshapeOp):  # one moving size-1 dims only (a squeeze): its input transposed alike
        src = shape_of(producer.input.type)
        kept_in = [d for d, n in enumerate(src) if n != 1]
        kept_out = [d for d, n in enumerate(shape_of(source.type)) if n != 1]
        if [src[d] for d in kept_in] != [shape_of(source.type)[d] for d in kept_out]:
            return False
        order = list(range(len(src)))
        for slot, d in zip(kept_in, (kept_in[kept_out.index(p)] for p in perm if p in kept_out)):
            order[slot] = d
        value = b.add(tta.ReshapeOp(_transposed(b, producer.input, order), out))
    elif isinstance(producer, tta.ReduceOp):  # the reduction of the input transposed alike, the reduced dim in place
        axis = producer.axis.value.data
        order = list(perm)
        if not producer.keeps_dims:
            kept = [d for d in range(len(perm) + 1) if d != axis]
            order = [kept[p] for p in perm]
            order.insert(axis, axis)
        value = b.add(type(producer)(_transposed(b, producer.input, order), axis, producer.keeps_dims))
    else:
        return False
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)
    if not source.uses:  # its operands' transposes may move on: they are their only readers now
        Rewriter.erase_op(producer)
    return True


def _transpose_table(op: tta.TransposeOp, take: tta.TakeOp) -> bool:
    """Transpose `op` of `take`'s result as a take from the table transposed alike, when the indices' dims stay
    together and in order: a relative-position bias `emb[buckets].permute(2, 0, 1)` (T5's) gathers `[H, L, L]`
    from the table's columns in one kernel, where a computed value's transpose needs a kernel of its own."""
    perm, axis = list(op.perm), take.axis.value.data
    block = list(range(axis, axis + len(shape_of(take.indices.type))))
    if not block or axis not in perm or perm[perm.index(axis) :][: len(block)] != block:
        return False
    order = [p if p <= axis else p - len(block) + 1 for p in perm if p == axis or p not in block]
    b = Builder(op)
    value = b.add(tta.TakeOp(_transposed(b, take.table, order), take.indices, order.index(axis)))
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)
    Rewriter.erase_op(take)
    return True


def push_layouts(fn: func.FuncOp) -> None:
    """Push every transpose of `fn` that keeps the last dim, and every reshape merging dims, up as far as they go,
    and every reshape splitting dims down, then drop what has no users."""
    push_all(fn, tta.TransposeOp, push_transpose)
    push_all(fn, tta.ReshapeOp, push_reshape)
    push_all(fn, tta.ReshapeOp, sink_reshape)


@dataclass(frozen=True)
class PushLayoutsPass(ModulePass):
    """Transposes that keep the last dim (heads split or merged) and reshapes merging adjacent dims, of computed
    values (their only readers), become transposes and reshapes of the values read from memory, which the fusion
    reads as views: the elementwise ops computing them then compute in that layout, where a kernel of their own
    copied their result (RoPE's backward before a projection's weight gradient) or stored it for a reduction over
    the merged dims (a norm weight's gradient, summed over batch and sequence); reshapes splitting a computed
    value's dims move below its elementwise readers (a linear layer's activation and residual into its epilogue)."""

    name = "tinyton-push-layouts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            push_layouts(fn)
