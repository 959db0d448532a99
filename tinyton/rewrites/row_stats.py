"""Seed groups for the fusion planner: a statistic of a matmul's left operand joins that matmul.

After `tinyton-row-scale`, RMSNorm before a projection reads `r = rsqrt(mean(x * x) + eps)` and
`(x @ w) * r`. Greedy producer→consumer merging would take `x * x` into the kernel that computes `x`, or
the per-row ops into a reduction kernel of their own, leaving two launches where one suffices: the matmul
kernel can accumulate `sum(x * x)` in its K loop (tinyton/analysis/domain.py, `row_prologue`). So before
the greedy loop, each such statistic is proposed as one group with the matmuls it scales: the elementwise
chain, the reduction, the per-row ops after it, the sibling matmuls reading `x` and the ops applying the
statistic to their products. The planner keeps a proposal only if its analysis accepts it.

A training step's linear layer reads its output gradient `dy` twice more: as `dy.T` in the weight gradient
`dy.T @ x` and whole in the bias gradient `dy.sum(0)`, a sum over the product's K. Greedy merging sees a
reduction and a matmul over different domains that share an input, so each would read `dy` in a kernel of its
own; `operand_sum_groups` proposes them as one group, and the matmul kernel sums the K tiles of `dy.T` it
loads anyway (tinyton/analysis/matmul_operands.py, `permuted_map`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.domain import ELEMENTWISE, is_trivial
from tinyton.analysis.matmul_operands import PROLOGUE_MAX_ROWS, is_scalar_constant, left_rows
from tinyton.analysis.views import VIEWS
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.rewrites.outline import convex


def _source(red: tta.ReduceOp, lhs: Mapping[SSAValue, list[tta.MatmulOp]]) -> tuple[SSAValue, list[Operation]] | None:
    """Walk back from the reduction's input through single-use elementwise ops to a matmul's left operand."""
    chain: list[Operation] = []
    value = red.input
    while value not in lhs:
        op = value.op if isinstance(value, OpResult) else None
        if not isinstance(op, (tta.BinaryOp, tta.UnaryOp, tta.CastOp)) or len(list(value.uses)) != 1:
            return None
        rest = {v for v in op.operands if not is_scalar_constant(v)}
        if len(rest) != 1:
            return None
        chain.insert(0, op)
        value = rest.pop()
    return value, chain


def _consumers(red: tta.ReduceOp, products: set[SSAValue]) -> list[Operation] | None:
    """Elementwise ops from the reduction's result up to (and including) those applying it to a product."""
    found: list[Operation] = []
    stack = [red.result]
    while stack:
        for use in stack.pop().uses:
            op = use.operation
            if op in found:
                continue
            if not isinstance(op, ELEMENTWISE):
                return None
            found.append(op)
            if not products & set(op.operands):
                stack.append(op.results[0])
    return found


def row_stat_groups(ops: Sequence[Operation], index: Mapping[Operation, int]) -> list[list[Operation]]:
    """Proposed groups (ops in program order, disjoint); each still needs the planner's analysis."""
    lhs: dict[SSAValue, list[tta.MatmulOp]] = {}
    for op in ops:
        if isinstance(op, tta.MatmulOp):
            lhs.setdefault(op.lhs, []).append(op)
    claimed: set[Operation] = set()
    groups = []
    for red in ops:
        if not isinstance(red, tta.ReduceOp) or red.axis.value.data != len(shape_of(red.input.type)) - 1:
            continue
        found = _source(red, lhs)
        if found is None:
            continue
        after = _consumers(red, {m.result for m in lhs[found[0]]})
        if after is None:
            continue
        read = {v for op in after for v in op.operands}
        matmuls = [m for m in lhs[found[0]] if m.result in read]
        members = {*found[1], red, *after, *matmuls}
        if not members.isdisjoint(claimed) or not all(op in index for op in members) or not convex(members, index):
            continue
        claimed |= members
        groups.append(sorted(members, key=index.__getitem__))
    return groups


def _elementwise_source(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """The value a chain of single-use elementwise ops of one array (other operands scalar constants) computes
    `value` from, and the chain in program order."""
    chain: list[Operation] = []
    while isinstance(value, OpResult) and isinstance(value.op, (tta.BinaryOp, tta.UnaryOp, tta.CastOp)):
        rest = {v for v in value.op.operands if not is_scalar_constant(v)}
        if len(list(value.uses)) != 1 or len(rest) != 1:
            break
        chain.insert(0, value.op)
        value = rest.pop()
    return value, chain


def _viewed(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    """The value a chain of layout ops (transposes, reshapes, ...) reads, and the chain."""
    chain: list[Operation] = []
    while isinstance(value, OpResult) and isinstance(value.op, VIEWS):
        chain.insert(0, value.op)
        value = value.op.operands[0]
    return value, chain


def operand_sum_groups(ops: Sequence[Operation], index: Mapping[Operation, int]) -> list[list[Operation]]:
    """Proposed groups (ops in program order; several may hold one reduction: the planner keeps the first its
    analysis accepts): a reduction of an array, through elementwise ops and views, with the matmuls reading a
    view of the same array as their left operand (all the readers of that operand: siblings share it), of at most
    PROLOGUE_MAX_ROWS rows: the kernel sums the operand's tiles from registers, outside the TMA and wgmma
    pipeline, which a prologue of more rows was measured to slow down (analysis/matmul_operands.py); whether
    a larger weight gradient gains from it is still to be measured on a GPU."""
    left_operands: dict[SSAValue, list[SSAValue]] = {}
    for op in ops:
        if isinstance(op, tta.MatmulOp):
            viewers = left_operands.setdefault(_viewed(op.lhs)[0], [])
            viewers += [op.lhs] if op.lhs not in viewers else []
    groups = []
    for red in ops:
        if not isinstance(red, tta.ReduceOp) or isinstance(red, tta.ArgReduceOp) or is_trivial(red):
            continue
        viewed, chain = _elementwise_source(red.input)
        array, views = _viewed(viewed)
        for lhs in left_operands.get(array, []):
            if left_rows(lhs) > PROLOGUE_MAX_ROWS:
                continue  # its tiles summed beside the tensor-core pipeline, as a prologue's are: not yet measured
            if not all(isinstance(u.operation, tta.MatmulOp) and u.index == 0 for u in lhs.uses):
                continue
            members = {*chain, red, *views, *_viewed(lhs)[1], *(u.operation for u in lhs.uses)}
            inner = members - {red, *(u.operation for u in lhs.uses)}
            read_inside = all(u.operation in members for op in inner for u in op.results[0].uses)
            if read_inside and all(op in index for op in members) and convex(members, index):
                groups.append(sorted(members, key=index.__getitem__))
    return groups
