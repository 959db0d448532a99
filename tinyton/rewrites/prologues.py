"""Give each kernel of projections its own copy of their computed input (a norm before q and k/v projections).

A matmul kernel evaluates a computed left operand in its K loop (tinyton/analysis/matmul_operands.py), but
an op belongs to one kernel: when the projections of one normed input have different output shapes
(grouped-query attention: q is `H * D` wide, k and v `KV * D`) they are two kernels, and the norm would
have to be written to memory by one of them for the other. Recomputing it is cheaper (a pass over the
rows of `x`, not a store and a load of them), so before planning each further output shape gets its own
copy of the operand's exclusive cone: the elementwise ops and row reductions that compute it and nothing
else. Siblings of one shape keep sharing one copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects import func
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.matmul_operands import K_LOOP_OPS, PROLOGUE_MAX_ROWS, left_rows
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of


def _row_reduction(op: Operation) -> bool:
    return isinstance(op, tta.ReduceOp) and op.axis.value.data == len(shape_of(op.input.type)) - 1


def _unit_reshape(op: Operation) -> bool:
    """A reshape that only adds or removes size-1 dims (free in a K loop)."""
    if not isinstance(op, tta.ReshapeOp):
        return False
    return [d for d in shape_of(op.input.type) if d != 1] == [d for d in shape_of(op.result.type) if d != 1]


def exclusive_cone(value: SSAValue, users: set[Operation], order: Mapping[Operation, int]) -> list[Operation]:
    """The elementwise ops and row reductions computing `value` whose results nobody but they and `users`
    read, in program order (empty when `value` is not computed by one of them)."""
    if not isinstance(value, OpResult) or not isinstance(value.op, (*K_LOOP_OPS, tta.ReduceOp, tta.ReshapeOp)):
        return []
    cone: set[Operation] = set()
    pending = [value.op]
    while pending:
        op = max(pending, key=order.__getitem__)  # consumers before producers
        pending.remove(op)
        if op in cone or not (isinstance(op, K_LOOP_OPS) or _row_reduction(op) or _unit_reshape(op)):
            continue
        if not all(u.operation in cone or u.operation in users for r in op.results for u in r.uses):
            continue
        cone.add(op)
        pending += [v.op for v in op.operands if isinstance(v, OpResult) and v.op in order and v.op not in pending]
    return sorted(cone, key=order.__getitem__)


def _product_shape(user: Operation, index: int) -> tuple[int, ...] | None:
    """The product shape of a matmul reading a value as its left operand, directly or through size-1
    reshapes read only that way; None for any other reader."""
    if isinstance(user, tta.MatmulOp):
        return shape_of(user.results[0].type) if index == 0 else None
    if not _unit_reshape(user):
        return None
    shapes = {_product_shape(u.operation, u.index) for u in user.results[0].uses}
    return shapes.pop() if len(shapes) == 1 else None


def duplicate_shared_prologues(fn: func.FuncOp) -> None:
    """Per value read only as the left operand of matmuls of several output shapes (directly or through
    size-1 reshapes): a copy of its exclusive cone for each shape but the first."""
    ops = list(fn.body.block.ops)
    order = {op: i for i, op in enumerate(ops)}
    for op in ops:
        for value in op.results:
            uses = list(value.uses)
            shapes = [_product_shape(u.operation, u.index) for u in uses]
            if not uses or None in shapes or len(set(shapes)) < 2 or left_rows(value) > PROLOGUE_MAX_ROWS:
                continue
            cone = exclusive_cone(value, {u.operation for u in uses}, order)
            if not cone:
                continue
            for shape in list(dict.fromkeys(shapes))[1:]:
                mapping: dict[SSAValue, SSAValue] = {}
                clones = [c.clone(mapping) for c in cone]
                Rewriter.insert_op(clones, InsertPoint.after(cone[-1]))
                for u, s in zip(uses, shapes):
                    if s == shape:
                        u.operation.operands[u.index] = mapping[value]


def prologue_groups(ops: Sequence[Operation], index: Mapping[Operation, int]) -> list[list[Operation]]:
    """Proposed groups for the planner: a computed left operand's exclusive cone that holds a row statistic
    (a norm), with the matmuls reading it, so that greedy merging (which takes producers into consumers edge
    by edge) cannot first give the square of the norm to the kernel that computes `x`. Cones of elementwise
    ops only are left to greedy merging, which makes them the epilogue of their producer where it can (a
    SwiGLU after the gate/up projections: computed once, not once per column tile of the down projection's
    programs). The planner keeps a proposal its analysis accepts."""
    order = dict(index)
    groups, claimed = [], set()
    for op in ops:
        if not isinstance(op, tta.MatmulOp) or op in claimed or left_rows(op.lhs) > PROLOGUE_MAX_ROWS:
            continue
        users = {u.operation for u in op.lhs.uses}
        if not all(isinstance(u, tta.MatmulOp) for u in users) or not all(u in order for u in users):
            continue
        cone = exclusive_cone(op.lhs, users, order)
        members = {*cone, *users}
        if any(isinstance(c, tta.ReduceOp) for c in cone) and members.isdisjoint(claimed):
            claimed |= members
            groups.append(sorted(members, key=order.__getitem__))
    return groups
