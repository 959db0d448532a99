"""`tinyton-in-place`: every `tta.put` writes into its destination's buffer.

Takes and gives: a module of `func.func`s of tta ops (before fusion).

A put's result shares its destination's buffer (its kernel stores only the assigned elements: a KV-cache row,
not the cache), which is correct when every other reader of the destination runs before the put. This pass
makes that so:
- readers that cannot run before the put read a copy of the destination instead, taken before it (a
  same-type `tta.cast`, a kernel of its own only where nothing fuses it): those that depend on the put's
  result, the function's return of the old value, and further puts into the same destination. One put per
  destination keeps the buffer: the one in an updated input's chain of assignments, else the first; an
  input that is not updated (an assignment into a copy of it) is never written;
- the block is reordered (stably, topologically) so that the other readers come before the put, and the
  fusion planner keeps them there (`ordering_edges`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type
from tinyton.rewrites.outline import functions


def ordering_edges(ops: Sequence[Operation]) -> list[tuple[Operation, Operation]]:
    """(reader, put) for each other reader among `ops` of a put's destination: the reader must run first."""
    members = set(ops)
    return [(u.operation, op) for op in ops if isinstance(op, tta.PutOp)
            for u in op.dest.uses if u.operation is not op and u.operation in members]


def update_chains(fn: func.FuncOp) -> set[tta.PutOp]:
    """The puts whose results end up in an input written back by the function (`tta.updates`)."""
    updates = fn.attributes.get(tta.UPDATES)
    if updates is None:
        return set()
    ret = fn.body.block.last_op
    chain: set[tta.PutOp] = set()
    for value in list(ret.operands)[len(ret.operands) - len(updates.get_values()) :]:
        while isinstance(value, OpResult) and isinstance(value.op, tta.PutOp):
            chain.add(value.op)
            value = value.op.dest
    return chain


def _after(put: tta.PutOp) -> set[Operation]:
    """The ops that read the put's result, directly or not."""
    seen: set[Operation] = set()
    pending = [put.result]
    while pending:
        for use in pending.pop().uses:
            if use.operation not in seen:
                seen.add(use.operation)
                pending.extend(use.operation.results)
    return seen


def _copy(value: SSAValue) -> SSAValue:
    """A copy of `value`, right after its definition."""
    copy = tta.CastOp(value, element_type(value.type))
    if isinstance(value, BlockArgument):
        block = value.block
        Rewriter.insert_op(copy, InsertPoint.at_start(block))
    else:
        Rewriter.insert_op(copy, InsertPoint.after(value.op))
    return copy.result


def separate_readers(fn: func.FuncOp) -> None:
    """Give the readers of a destination that cannot run before its put a copy of it (module docstring)."""
    chain = update_chains(fn)
    puts: dict[SSAValue, list[tta.PutOp]] = {}
    for op in fn.body.block.ops:
        if isinstance(op, tta.PutOp):
            puts.setdefault(op.dest, []).append(op)
    for dest, writers in puts.items():
        chained = [p for p in writers if p in chain]
        keeper = chained[0] if chained else None if isinstance(dest, BlockArgument) else writers[0]
        after = _after(keeper) if keeper is not None else set()
        late = [u for u in dest.uses if u.operation is not keeper and (
            isinstance(u.operation, func.ReturnOp) or u.operation in after) and not isinstance(u.operation, tta.PutOp)]
        if late:
            copy = _copy(dest)
            for u in late:
                u.operation.operands[u.index] = copy
        for put in writers:
            if put is not keeper:  # each other put writes into a copy of its own
                put.operands[0] = _copy(dest)


def reorder(block: Block) -> None:
    """The block's ops in a topological order of their data and `ordering_edges`, program order otherwise."""
    ops = [op for op in block.ops if op is not block.last_op]
    index = {op: i for i, op in enumerate(ops)}
    succ: dict[Operation, list[Operation]] = {op: [] for op in ops}
    preds = dict.fromkeys(ops, 0)
    edges = [(v.op, op) for op in ops for v in op.operands if isinstance(v, OpResult) and v.op in index]
    for a, b in [*edges, *ordering_edges(ops)]:
        succ[a].append(b)
        preds[b] += 1
    ready = [(i, op) for op, i in index.items() if not preds[op]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for b in succ[op]:
            preds[b] -= 1
            if not preds[b]:
                heapq.heappush(ready, (index[b], b))
    if len(order) != len(ops):
        raise AssertionError("a put's readers depend on it after separate_readers")
    if order == ops:
        return
    for op in ops:
        op.detach()
    for op in order:
        Rewriter.insert_op(op, InsertPoint.before(block.last_op))


def prepare_puts(fn: func.FuncOp) -> None:
    """`separate_readers`, then `reorder` (what the planner assumes of a function holding puts)."""
    if any(isinstance(op, tta.PutOp) for op in fn.body.block.ops):
        separate_readers(fn)
        reorder(fn.body.block)


@dataclass(frozen=True)
class InPlacePass(ModulePass):
    """Readers of a put's destination that must see the old value read a copy; the others run before it."""

    name = "tinyton-in-place"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        for fn in functions(op):
            prepare_puts(fn)
