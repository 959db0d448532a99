"""`tinyton-push-gathers`: a flat gather of an elementwise value gathers that value's operands instead.

Takes: a module of `func.func`s of tta ops. Gives: the same functions computing the same values, where every
`tta.take` along axis 0 of a flattened elementwise value (`take(reshape(f(a, b, ...), (N,)), i)`, what
`take_along_axis` and flat indexing trace to) that reads fewer elements than the value has is `f` of the
gathered operands: `f(take(a', i), take(b', j), ...)`. An operand of the value's full shape is gathered at
`i`; one broadcast into it (a row statistic, shape (rows, 1)) at `j`, the same element's coordinates
with the broadcast dims dropped; scalars stay. Cross-entropy's `take_along_axis(logits - lse, labels)` then
reads one logit a row and the row's `lse`, so the log-probabilities (a vocabulary-wide array) are never
written to memory: the fusion only fuses a gather from an array in memory (tinyton/analysis/domain.py).

Indices keep `tta.take`'s meaning: negative ones wrap, and one outside `[-N, N)` stays outside every
gathered operand (NumPy's IndexError), so the rewrite never turns an error into a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, Signedness
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type, shape_of, tile_type
from tinyton.rewrites.outline import functions
from tinyton.rewrites.remap import ELEMENTWISE, Builder, push_all


def _elementwise_source(take: tta.TakeOp) -> Operation | None:
    """The elementwise op whose flattened value `take` gathers from, where pushing pays: fewer indices than
    elements (more would read each operand at scattered indices more often than once in order)."""
    table = take.table
    if take.axis.value.data != 0 or len(shape_of(table.type)) != 1:
        return None
    if isinstance(table, OpResult) and isinstance(table.op, tta.ReshapeOp):
        table = table.op.input
    if not isinstance(table, OpResult) or not isinstance(table.op, ELEMENTWISE):
        return None
    if prod(shape_of(take.indices.type)) >= prod(shape_of(table.type)):
        return None
    return table.op


class _Indices:
    """The gather's indices, normalised once (negative ones wrapped) for the operands broadcast into the value."""

    def __init__(self, b: Builder, indices: SSAValue, shape: tuple[int, ...]):
        self.b, self.raw, self.shape = b, indices, shape
        self.element = element_type(indices.type)
        self._wrapped: tuple[SSAValue, SSAValue] | None = None

    def const(self, value: int) -> SSAValue:
        return self.b.add(tta.ConstantOp(IntegerAttr(value, self.element)))

    def wrapped(self) -> tuple[SSAValue, SSAValue]:
        """(index in [0, N) where valid, the mask of the invalid ones)."""
        if self._wrapped is None:
            b, i, n = self.b, self.raw, prod(self.shape)
            invalid = b.add(tta.CmpOp("ge", i, self.const(n)))
            assert isinstance(self.element, IntegerType)
            if self.element.signedness.data != Signedness.UNSIGNED:
                negative = b.add(tta.CmpOp("lt", i, self.const(0)))
                invalid = b.add(tta.OrOp(invalid, b.add(tta.CmpOp("lt", i, self.const(-n)))))
                i = b.add(tta.WhereOp(negative, b.add(tta.AddOp(i, self.const(n))), i))
            self._wrapped = (i, invalid)
        return self._wrapped

    def into(self, operand_shape: tuple[int, ...]) -> SSAValue:
        """The flat index into an operand broadcast (NumPy, trailing dims) into the value's shape; past its
        end where the gather's index is invalid."""
        b = self.b
        i, invalid = self.wrapped()
        padded = (1,) * (len(self.shape) - len(operand_shape)) + operand_shape
        index, stride, operand_stride = None, 1, 1
        for axis in reversed(range(len(self.shape))):
            n = self.shape[axis]
            if padded[axis] != 1:
                coord = b.add(tta.FloorDivOp(i, self.const(stride))) if stride != 1 else i
                if axis > 0:  # the first axis needs no modulo: i < N
                    coord = b.add(tta.ModOp(coord, self.const(n)))
                term = b.add(tta.MulOp(coord, self.const(operand_stride))) if operand_stride != 1 else coord
                index = term if index is None else b.add(tta.AddOp(index, term))
                operand_stride *= n
            stride *= n
        if index is None:  # an operand of size-1 dims only: its one element
            index = self.const(0)
        return b.add(tta.WhereOp(invalid, self.const(prod(operand_shape)), index))


def push_gather(take: tta.TakeOp) -> bool:
    """Gather the operands of the elementwise op `take` reads from, if it pays; True if rewritten."""
    source = _elementwise_source(take)
    if source is None or not any(shape_of(v.type) for v in source.operands):
        return False  # of scalars only, nothing would be gathered, and an index out of bounds must still raise
    b = Builder(take)
    shape = shape_of(source.results[0].type)
    indices = _Indices(b, take.indices, shape)
    operands = []
    for v in source.operands:
        s = shape_of(v.type)
        if not s:
            operands.append(v)
            continue
        flat = v if len(s) == 1 and s == shape else b.add(tta.ReshapeOp(v, (prod(s),)))
        operands.append(b.add(tta.TakeOp(flat, take.indices if s == shape else indices.into(s), 0)))
    out = shape_of(take.result.type)
    clone = type(source).create(operands=operands, result_types=[tile_type(element_type(source.results[0].type), out)],
                                properties=dict(source.properties), attributes=dict(source.attributes))
    take.result.replace_all_uses_with(b.broadcast(b.add(clone), out))
    Rewriter.erase_op(take)
    return True


def push_gathers(fn: func.FuncOp) -> None:
    """Push every gather of `fn` up as far as it pays, then drop what no longer has users."""
    push_all(fn, tta.TakeOp, push_gather)


@dataclass(frozen=True)
class PushGathersPass(ModulePass):
    """Gathers of flattened elementwise values become gathers of their operands (index arithmetic)."""

    name = "tinyton-push-gathers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            push_gathers(fn)
