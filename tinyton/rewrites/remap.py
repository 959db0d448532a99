"""Index remappings as index arithmetic: `tinyton-concatenate-to-slices` and `tinyton-push-slices`.

Takes: a module of `func.func`s of tta ops. Gives: the same functions computing the same values, where
- (`tinyton-concatenate-to-slices`) every `tta.concatenate` is a select between its parts, each a
  `tta.slice` of one input shifted to its place along the axis (unspecified outside it): `where(i < n0,
  part0, where(i < n0 + n1, part1, part2))` over an `arange` of the axis;
- (`tinyton-push-slices`) every `tta.slice` of a value computed by an elementwise op (or a transpose,
  broadcast, size-1 reshape, arange, or another slice) is moved up onto that op's operands: the op is
  evaluated at the remapped indices (tinygrad's idea). A window of the columns of a product with few rows
  is the product with a window of its right operand (`_push_into_product`). A slice with a fill that pads becomes a select
  between the unpadded window and the fill. Slices end up on values read from memory, which the fusion
  reads as views with an offset and bounds (tinyton/analysis/domain.py `View`), so a slice, flip, pad or
  concatenation of a computed value fuses with its producer and its consumers. The producer stays for
  its other users (elementwise work is recomputed, memory is not re-read in another kernel).
  (`tinyton-push-layouts`, rewrites/layouts.py, does the same for head transposes and merging reshapes.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, i32
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.attention_backward import gradient_concatenations
from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type, is_float, shape_of, tile_type
from tinyton.rewrites.attention_canonical import backward_product_operand
from tinyton.rewrites.outline import erase_dead_ops, functions

ELEMENTWISE = (tta.BinaryOp, tta.CmpOp, tta.UnaryOp, tta.WhereOp, tta.CastOp, tta.CheckIndexOp)
"""Ops computed element by element, which a slice or gather of their value moves to their operands (an index check
then checks the elements read, as a dead one checks none)."""
Window = tuple[int, int, int]
"""(start, step, size) of one dim of a slice."""


SliceKey = tuple[SSAValue, tuple[Window, ...], Any]
"""A slice's input, windows and fill."""


class Builder:
    """Inserts ops before `anchor`, located where it is; a slice already made (or pushed) with the same input,
    windows and fill is reused where it is defined before `anchor` (`slices`, shared by a pass's builders)."""

    def __init__(self, anchor: Operation, slices: dict[SliceKey, SSAValue] | None = None):
        self.anchor = anchor
        self.slices = {} if slices is None else slices

    def add(self, op: Operation) -> SSAValue:
        op.location = self.anchor.location
        Rewriter.insert_op(op, InsertPoint.before(self.anchor))
        return op.results[0]

    def const(self, value: int, element: Attribute = i32) -> SSAValue:
        return self.add(tta.ConstantOp(IntegerAttr(int(value), element)))

    def slice(self, value: SSAValue, windows: Sequence[Window], fill=None) -> SSAValue:
        shape = shape_of(value.type)
        if all(w == (0, 1, n) for w, n in zip(windows, shape)) and fill is None:
            return value
        key = (value, tuple(windows), fill)
        made = self.slices.get(key)
        if made is not None and self._available(made):
            return made
        self.slices[key] = self.add(tta.SliceOp(value, [w[0] for w in windows], [w[1] for w in windows],
                                                [w[2] for w in windows], fill))
        return self.slices[key]

    def _available(self, value: SSAValue) -> bool:
        """Whether `value` is still defined, before the anchor."""
        if not isinstance(value, OpResult):
            return True
        return value.op.parent is self.anchor.parent and value.op.is_before_in_block(self.anchor)

    def index_along(self, axis: int, shape: Sequence[int]) -> SSAValue:
        """`arange(shape[axis])` shaped to broadcast along `axis` of `shape`."""
        n = shape[axis]
        index = self.add(tta.ArangeOp(0, n))
        return self.add(tta.ReshapeOp(index, tuple(n if d == axis else 1 for d in range(len(shape)))))

    def broadcast(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        return value if shape_of(value.type) == tuple(shape) else self.add(tta.BroadcastToOp(value, shape))


# ---- concatenate ----------------------------------------------------------------------------------


def concatenate_to_slices(op: tta.ConcatenateOp) -> None:
    """Replace `op` by a select between its parts (see the module docstring)."""
    b = Builder(op)
    out, axis = shape_of(op.result.type), op.axis.value.data
    if prod(out) == 0:
        zero = b.add(tta.ConstantOp(_zero(element_type(op.result.type))))
        value = b.broadcast(zero, out)
    else:
        parts, at = [], 0
        for v in op.inputs:
            n = shape_of(v.type)[axis]
            if n:
                windows = [(-at if d == axis else 0, 1, size) for d, size in enumerate(out)]
                parts.append((at + n, b.slice(v, windows)))
            at += n
        value = parts[-1][1]
        if len(parts) > 1:
            index = b.index_along(axis, out)
            for end, part in reversed(parts[:-1]):
                value = b.add(tta.WhereOp(b.add(tta.CmpOp("lt", index, b.const(end))), part, value))
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)


def _zero(element: Attribute) -> IntegerAttr | FloatAttr:
    return FloatAttr(0.0, element) if is_float(element) else IntegerAttr(0, element)


# ---- pushing slices -------------------------------------------------------------------------------


def recomputed(b: Builder, producer: Operation, operands: list[SSAValue], out: Sequence[int]) -> SSAValue:
    """The elementwise op `producer` of `operands` (its operands remapped), broadcast to `out`."""
    shape = tta.broadcast_shapes(*(shape_of(v.type) for v in operands))
    clone = type(producer).create(operands=operands,
                                  result_types=[tile_type(element_type(producer.results[0].type), shape)],
                                  properties=dict(producer.properties), attributes=dict(producer.attributes))
    return b.broadcast(b.add(clone), out)


def _windows(op: tta.SliceOp) -> list[Window]:
    return list(zip(op.starts, op.steps, shape_of(op.result.type)))


def _operand_windows(windows: Sequence[Window], operand_shape: Sequence[int]) -> list[Window]:
    """The windows of an operand broadcast (NumPy, trailing dims) into a result sliced by `windows`: its
    size-1 dims stay whole (every index of a broadcast dim reads element 0)."""
    k = len(windows) - len(operand_shape)
    return [(0, 1, 1) if n == 1 else windows[k + j] for j, n in enumerate(operand_shape)]


def push_slice(op: tta.SliceOp, slices: dict[SliceKey, SSAValue] | None = None) -> bool:
    """Move slice `op` above the op computing its input, if that is a remappable op; True if rewritten. `slices`
    remembers the slices made and what each became, so a value read twice by the ops above (`x * x`) is sliced
    once: without it a chain of such ops is sliced twice as often at every step up."""
    source = op.input
    out = shape_of(op.result.type)
    if not isinstance(source, OpResult) or prod(out) == 0:
        return False
    producer = source.op
    b = Builder(op, slices)
    windows = _windows(op)
    fill = op.fill
    if isinstance(producer, tta.SliceOp):
        inner = _windows(producer)
        composed = [(s1 + s2 * t1, t1 * t2, n) for (s1, t1, _), (s2, t2, n) in zip(inner, windows)]
        if fill is not None and op.pads:  # the outer padding must read the fill, not the inner input
            value = _select_fill(b, op, b.slice(source, windows))
        else:
            value = b.slice(producer.input, composed, producer.fill)
    elif isinstance(producer, tta.MatmulOp):
        value = _push_into_product(b, producer, windows, fill)
        if value is None:
            return False
    elif not isinstance(producer, (*ELEMENTWISE, tta.TransposeOp, tta.BroadcastToOp, tta.ReshapeOp, tta.ArangeOp)):
        return False
    elif fill is not None and op.pads:
        value = _select_fill(b, op, b.slice(source, windows))
    elif isinstance(producer, ELEMENTWISE):
        operands = [v if not shape_of(v.type) else b.slice(v, _operand_windows(windows, shape_of(v.type)))
                    for v in producer.operands]
        value = recomputed(b, producer, operands, out)
    elif isinstance(producer, tta.TransposeOp):
        inverse = [0] * len(out)
        for d, p in enumerate(producer.perm):
            inverse[p] = windows[d]
        value = b.add(tta.TransposeOp(b.slice(producer.input, inverse), producer.perm))
    elif isinstance(producer, tta.BroadcastToOp):
        value = b.broadcast(b.slice(producer.input, _operand_windows(windows, shape_of(producer.input.type))), out)
    elif isinstance(producer, tta.ReshapeOp):
        value = _push_through_reshape(b, producer, windows, out)
        if value is None:
            return False
    else:
        value = _arange_window(b, producer, windows[0])
    b.slices[(source, tuple(windows), fill)] = value
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)
    return True


RECOMPUTED_ROWS = 16
"""Most rows of a product whose column window is computed by a product of its own: few rows (a decode
step's) make the kernel a pass over the weights, whose shifted windows it finds in cache, so a second dot
costs next to nothing; with more rows the dots are the cost (a prompt's projections keep their slices in
another kernel)."""


def _push_into_product(b: Builder, producer: tta.MatmulOp, windows: Sequence[Window], fill) -> SSAValue | None:
    """A window along the columns of a product with few rows (RoPE's halves of each head of a decode step's
    q or k) is the product of the same left operand and a window of the right operand, a sibling matmul
    that shares its kernel (its loads read the right operand at shifted columns)."""
    out = shape_of(producer.result.type)
    if fill is not None or len(out) < 2 or out[-2] > RECOMPUTED_ROWS or windows[-1][1] != 1:
        return None
    if backward_product_operand(producer.lhs):  # a short training sequence's `ds @ k`, left for the backward rewrite
        return None
    if any(w != (0, 1, n) for w, n in zip(windows[:-1], out[:-1])):
        return None
    rhs = shape_of(producer.rhs.type)
    window = [(0, 1, n) for n in rhs[:-1]] + [windows[-1]]
    return b.add(tta.MatmulOp(producer.lhs, b.slice(producer.rhs, window)))


def _select_fill(b: Builder, op: tta.SliceOp, unpadded: SSAValue) -> SSAValue:
    """`where(inside, unpadded, fill)`: a padding slice of a computed value."""
    out = shape_of(op.result.type)
    inside = None
    for axis, ((lo, hi), n) in enumerate(zip(op.inside(), out)):
        if (lo, hi) == (0, n):
            continue
        index = b.index_along(axis, out)
        for keep in ([b.add(tta.CmpOp("ge", index, b.const(lo)))] if lo > 0 else []) + (
            [b.add(tta.CmpOp("lt", index, b.const(hi)))] if hi < n else []
        ):
            inside = keep if inside is None else b.add(tta.AndOp(inside, keep))
    if inside is None:  # every index lies inside: nothing to fill
        return unpadded
    fill = b.add(tta.ConstantOp(op.fill))
    return b.add(tta.WhereOp(inside, unpadded, fill))


def _push_through_reshape(b: Builder, producer: tta.ReshapeOp, windows: Sequence[Window],
                          out: Sequence[int]) -> SSAValue | None:
    """A slice of a reshape that only adds or removes size-1 dims: the slice of its input, reshaped."""
    src, mid = shape_of(producer.input.type), shape_of(producer.result.type)
    if [d for d in src if d != 1] != [d for d in mid if d != 1]:
        return None
    moved = iter(w for w, d in zip(windows, mid) if d != 1)
    inner = [next(moved) if d != 1 else (0, 1, 1) for d in src]
    sliced = b.slice(producer.input, inner)
    kept = tuple(w[2] if d != 1 else 1 for w, d in zip(windows, mid))  # size-1 dims padded: broadcast below
    reshaped = sliced if shape_of(sliced.type) == kept else b.add(tta.ReshapeOp(sliced, kept))
    return b.broadcast(reshaped, out)


def _arange_window(b: Builder, producer: tta.ArangeOp, window: Window) -> SSAValue:
    """`arange(a, e)[s::t]` is `arange(n) * t + (a + s)`."""
    start, step, n = window
    first = producer.start.value.data + start
    if step == 1:
        return b.add(tta.ArangeOp(first, first + n))
    scaled = b.add(tta.MulOp(b.add(tta.ArangeOp(0, n)), b.const(step)))
    return b.add(tta.AddOp(scaled, b.const(first)))


def push_all(fn: func.FuncOp, kind: type[Operation], push: Callable[[Any], bool]) -> None:
    """Apply `push` (True when it rewrote) to every op of `kind` in `fn` until none moves, then drop what no
    longer has users."""
    changed = True
    while changed:
        changed = False
        for op in list(fn.body.block.ops):
            if isinstance(op, kind) and op.parent is not None:
                changed |= push(op)
    erase_dead_ops(fn)


def push_slices(fn: func.FuncOp) -> None:
    """Push every slice of `fn` up as far as it goes, then drop what no longer has users."""
    slices: dict[SliceKey, SSAValue] = {}
    push_all(fn, tta.SliceOp, lambda op: push_slice(op, slices))


@dataclass(frozen=True)
class ConcatenateToSlicesPass(ModulePass):
    """`tta.concatenate` as a select between shifted slices of its inputs; with `keep_gradients`, not a
    concatenation of attention gradients, which the backward's kernels store in place
    (`gradient_concatenations`)."""

    name = "tinyton-concatenate-to-slices"
    keep_gradients: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            ops = list(fn.body.block.ops)
            kept = gradient_concatenations(ops) if self.keep_gradients else set()
            for concat in [o for o in ops if isinstance(o, tta.ConcatenateOp) and o not in kept]:
                concatenate_to_slices(concat)


@dataclass(frozen=True)
class PushSlicesPass(ModulePass):
    """Slices of computed values become slices of the values read from memory (index arithmetic); with
    `keep_gradients`, concatenations of attention gradients stay (`ConcatenateToSlicesPass`)."""

    name = "tinyton-push-slices"
    keep_gradients: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ConcatenateToSlicesPass(self.keep_gradients).apply(ctx, op)
        for fn in functions(op):
            push_slices(fn)
