"""`tinyton-split-long-sorts`: rows longer than one program's registers hold, sorted in chunks and merged.

Takes: a module of `func.func`s of tta ops. Gives: the same functions computing the same values, where every
`tta.sort`/`tta.argsort` of rows longer than one program sorts whole in registers (tinyton/lowering/fusion/
sorting.py; `max_sorted_row`, tinyton/limits.py: 8192, 4096 for 64-bit values) is
- the rows cut into P chunks of c elements (P a power of two, c at most that), the last one padded with the
  order's last value (NaN for ascending floats, -inf descending, an int type's largest or smallest);
- each chunk sorted by the row op (a `tta.sort` and a `tta.argsort` of one row share one network), its indices
  made the row's;
- log2(P) merge passes over the flattened rows, each merging adjacent pairs of sorted runs into runs twice as
  long (merge path, `_Merger.merge`): output p of runs L and R is L[i] or R[p - i], where i, the number of
  elements of L among the first p, comes from a binary search of gathers; the last pass computes the rows'
  own positions only, in the sort's shape, so the padding (sorted last) is never read out.

The order is the row op's: a merge puts an element of L before an equal one of R, and L holds the earlier part of
the row, so equal values (NaN among NaN, -0.0 and 0.0) keep index order, NumPy's stable sort; the padding, last in
the row, sorts after every element and is dropped. A sort and an argsort of one input and direction (torch's
`sort`) share one decomposition. Positions are int32, as the kernels index.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Attribute, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tinyton.analysis.views import VIEWS
from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type, is_float, shape_of
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.limits import max_sorted_row
from tinyton.rewrites.outline import functions
from tinyton.rewrites.remap import Builder


def chunking(n: int, longest: int) -> tuple[int, int]:
    """(P, c): a row of `n` cut into the fewest chunks, a power of two of them, of at most `longest` each."""
    chunks = 1 << (-(-n // longest) - 1).bit_length()
    return chunks, -(-n // chunks)


def longest_row(op: tta.SortingOp) -> int:
    """The longest row of `op`'s values one program sorts whole."""
    return max_sorted_row(element_type(op.input.type).bitwidth)


def last_value(element: Attribute, descending: bool) -> IntegerAttr | FloatAttr:
    """The value that comes last in the order of `element` (the padding's)."""
    if is_float(element):
        return FloatAttr(float("-inf") if descending else float("nan"), element)
    info = np.iinfo(ELEMENT_TO_NUMPY[element])
    return IntegerAttr(int(info.min if descending else info.max), element)


class _Merger:
    """Builds merge passes over flat tables: the values, then (for an argsort) their indices in the row."""

    def __init__(self, b: Builder, descending: bool):
        self.b, self.descending = b, descending
        self.constants: dict[int, SSAValue] = {}

    def const(self, value: int) -> SSAValue:
        """An i32 constant, one op per value."""
        if value not in self.constants:
            self.constants[value] = self.b.const(value)
        return self.constants[value]

    def op(self, kind: type[tta.BinaryOp], lhs: SSAValue, rhs: SSAValue | int) -> SSAValue:
        return self.b.add(kind(lhs, self.const(rhs) if isinstance(rhs, int) else rhs))

    def precedes(self, left: SSAValue, right: SSAValue) -> SSAValue:
        """Whether `left` (of the earlier run) comes before `right` in the merged run: at or before it in the
        order, NaN after every number (before, descending) and equal to NaN."""
        b = self.b
        at_or_before = b.add(tta.CmpOp("ge" if self.descending else "le", left, right))
        if not is_float(element_type(left.type)):
            return at_or_before
        nan = left if self.descending else right
        return b.add(tta.OrOp(at_or_before, b.add(tta.CmpOp("ne", nan, nan))))

    def gather(self, table: SSAValue, at: SSAValue) -> SSAValue:
        return self.b.add(tta.TakeOp(table, at, 0))

    def merge(self, tables: list[SSAValue], run: int, position: SSAValue) -> list[SSAValue]:
        """`tables` (flat, in sorted runs of `run`) with adjacent runs merged, at the flat `position`s asked (the
        whole table, or the last pass's unpadded rows in the sort's shape).

        Output p of the pair of runs L, R at `base` takes `taken` elements of L, taken in [lo, hi] the least at
        which L[taken] does not precede R[p - 1 - taken]: a search in halving steps. It carries absolute
        positions, so that a step reads only its own state: `last` (of L[taken - 1]), `following` (of
        R[p - taken]) and `slack` (hi - taken). The first pair's L[-1] (p = 0) wraps to the table's end: read
        and never taken, as no step moves there."""
        b, op = self.b, self.op
        p = op(tta.ModOp, position, 2 * run)
        base = op(tta.SubOp, position, p)
        lo = op(tta.MaximumOp, op(tta.SubOp, p, run), 0)
        last = op(tta.AddOp, base, op(tta.SubOp, lo, 1))
        following = op(tta.SubOp, op(tta.AddOp, position, run), lo)
        slack = op(tta.SubOp, op(tta.MinimumOp, p, run), lo)
        values = tables[0]
        for step in (1 << k for k in reversed(range(run.bit_length()))):
            size = op(tta.MinimumOp, slack, step)
            more, fewer = op(tta.AddOp, last, size), op(tta.SubOp, following, size)
            fits = self.precedes(self.gather(values, more), self.gather(values, fewer))
            last, following = b.add(tta.WhereOp(fits, more, last)), b.add(tta.WhereOp(fits, fewer, following))
            slack = b.add(tta.WhereOp(fits, op(tta.SubOp, slack, size), slack))
        left_end, right_end = op(tta.AddOp, base, run - 1), op(tta.AddOp, base, 2 * run - 1)
        at_left = op(tta.MinimumOp, op(tta.AddOp, last, 1), left_end)
        at_right = op(tta.MinimumOp, following, right_end)
        left_first = op(tta.AndOp, b.add(tta.CmpOp("lt", last, left_end)),
                        op(tta.OrOp, b.add(tta.CmpOp("gt", following, right_end)),
                           self.precedes(self.gather(values, at_left), self.gather(values, at_right))))
        source = b.add(tta.WhereOp(left_first, at_left, at_right))
        return [self.gather(t, source) for t in tables]  # a gather, which slices of the result stay on


def index_grid(b: Builder, shape: Sequence[int], strides: Sequence[int]) -> SSAValue:
    """The flat position `sum(i_k * strides[k])` of each index of `shape` (index arithmetic of aranges)."""
    grid = None
    for axis, (n, stride) in enumerate(zip(shape, strides)):
        if n == 1:
            continue
        index = b.add(tta.ArangeOp(0, n))
        if len(shape) > 1:
            index = b.add(tta.ReshapeOp(index, tuple(n if d == axis else 1 for d in range(len(shape)))))
        term = b.add(tta.MulOp(index, b.const(stride))) if stride != 1 else index
        grid = term if grid is None else b.add(tta.AddOp(grid, term))
    return grid if grid is not None else b.const(0)


def _chunks(b: Builder, x: SSAValue, chunks: int, chunk: int, descending: bool) -> SSAValue:
    """The rows of `x` as `[rows, chunks, chunk]`, the last chunk padded by the order's last value: a view, or
    a gather from the flattened rows (a padded window's reshape would be a kernel of its own)."""
    shape = shape_of(x.type)
    n, rows = shape[-1], prod(shape[:-1])
    if chunks * chunk == n:
        return b.add(tta.ReshapeOp(x, (rows, chunks, chunk)))
    flat = x if len(shape) == 1 else b.add(tta.ReshapeOp(x, (rows * n,)))
    grid = (rows, chunks, chunk)
    column = index_grid(b, (1, chunks, chunk), (0, chunk, 1))
    inside = b.add(tta.CmpOp("lt", column, b.const(n)))
    at = b.add(tta.MinimumOp(column, b.const(n - 1)))
    if rows > 1:
        at = b.add(tta.AddOp(index_grid(b, (rows, 1, 1), (n, 0, 0)), at))
    fill = b.add(tta.ConstantOp(last_value(element_type(x.type), descending)))
    return b.broadcast(b.add(tta.WhereOp(inside, b.add(tta.TakeOp(flat, at, 0)), fill)), grid)


def split_sort(ops: Sequence[tta.SortingOp]) -> None:
    """Replace `ops` (sorts and argsorts of one input, or of views alike of it, in one direction, of long rows) by
    chunk sorts and merge passes."""
    first = ops[0]
    b, descending = Builder(first), first.is_descending
    shape = shape_of(first.input.type)
    n, count = shape[-1], prod(shape[:-1])
    chunks, chunk = chunking(n, longest_row(first))
    padded = chunks * chunk
    x = _chunks(b, first.input, chunks, chunk, descending)
    tables = [b.add(tta.SortOp(x, 2, descending))]
    if any(isinstance(op, tta.ArgSortOp) for op in ops):
        starts = b.add(tta.CastOp(index_grid(b, (1, chunks, 1), (0, chunk, 0)), i64))
        tables.append(b.add(tta.AddOp(b.add(tta.ArgSortOp(x, 2, descending)), starts)))
    tables = [b.add(tta.ReshapeOp(t, (count * padded,))) for t in tables]
    merger = _Merger(b, descending)
    runs = [chunk << k for k in range(chunks.bit_length() - 1)]
    for run in runs[:-1]:
        tables = merger.merge(tables, run, b.add(tta.ArangeOp(0, count * padded)))
    row_strides = [padded * prod(shape[k + 1 : -1]) for k in range(len(shape) - 1)]
    results = merger.merge(tables, runs[-1], index_grid(b, shape, (*row_strides, 1)))
    for op in ops:
        op.result.replace_all_uses_with(results[-1] if isinstance(op, tta.ArgSortOp) else results[0])
        Rewriter.erase_op(op)


def is_long(op: tta.SortingOp) -> bool:
    """Whether `op` sorts rows longer than one program holds (an empty array has nothing to sort)."""
    shape = shape_of(op.input.type)
    return shape[-1] > longest_row(op) and prod(shape) > 0


def value_key(value: SSAValue) -> Hashable:
    """`value`, or for a view of a value (a transpose, a reshape) the view's kind, properties and input's key: the
    tracer spells one view per reader (`np.sort(x, 0)` and `np.argsort(x, 0)` each move the axis last)."""
    if not isinstance(value, OpResult) or not isinstance(value.op, VIEWS):
        return value
    view = value.op
    return view.name, value.type, tuple(sorted(view.properties.items())), value_key(view.operands[0])


def split_long_sorts(fn: func.FuncOp) -> None:
    """Split every long sort of `fn`, the sorts and argsorts of one input (or of views alike of it) and direction
    together."""
    groups: dict[tuple[Hashable, bool], list[tta.SortingOp]] = {}
    for op in fn.body.block.ops:
        if isinstance(op, tta.SortingOp) and is_long(op):
            groups.setdefault((value_key(op.input), op.is_descending), []).append(op)
    for ops in groups.values():
        split_sort(ops)


@dataclass(frozen=True)
class SplitLongSortsPass(ModulePass):
    """Sorts of rows longer than one program sorts whole become chunk sorts and merge passes (see the module
    docstring)."""

    name = "tinyton-split-long-sorts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            split_long_sorts(fn)
