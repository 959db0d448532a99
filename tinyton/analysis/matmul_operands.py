"""What a matmul kernel computes in its K loop besides the products: row statistics and the left operand.

A matmul region's domain is its product `[..., M, N]`; its K loop reads `[BM, BK]` tiles of the left operand.
Two kinds of values vary along K, so they live in that loop and get no map in the domain:
- row statistics: a reduction over the last axis of an elementwise chain of one array `x [..., M, K]` read
  from memory (RMSNorm's `mean(x * x)`), accumulated from K tiles: in the product's own loop when `x` is
  the left operand, else in a loop before it (`row_prologue`);
- the left operand's prologue: a left operand computed in the group (RMSNorm's `(x * r * w).astype(bf16)`,
  the cast of an attention output to the projection's type) is evaluated per K tile, exactly as written,
  from tiles of arrays in memory, scalar constants and per-row values of the domain (`r`, computed before
  the loop from row statistics), so it is never written to memory (`lhs_prologue`).
The lowering is tinyton/lowering/fusion/matmul.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.not_fusable import NotFusable
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of

K_LOOP_OPS = (tta.BinaryOp, tta.UnaryOp, tta.CastOp, tta.WhereOp, tta.CmpOp)
"""Elementwise ops a K loop evaluates on `[BM, BK]` tiles."""


def is_scalar_constant(v: SSAValue) -> bool:
    return isinstance(v, OpResult) and isinstance(v.op, tta.ConstantOp) and not shape_of(v.type)


def check_matmul(matmuls: Sequence[tta.MatmulOp], reductions: Sequence[Operation],
                 external: Callable[[SSAValue], bool]) -> set[Operation]:
    """One matmul with elementwise epilogues, or sibling matmuls (one output shape, an operand in common,
    as q/k/v projections of one input): one K loop each over the same output tile, one launch. Right
    operands are read from memory; a left operand is read from memory or computed by a prologue
    (`lhs_prologue`). The reductions must be row statistics (`row_prologue`) of a left operand or of an
    array a prologue reads. Returns the ops of the K loops (they get no map in the domain)."""
    first = matmuls[0]
    for op in matmuls[1:]:
        if shape_of(op.result.type) != shape_of(first.result.type) or not set(op.operands) & set(first.operands):
            raise NotFusable("matmuls share a kernel only as siblings: one output shape, an operand in common")
    if not all(external(op.rhs) for op in matmuls):
        raise NotFusable("a matmul's right operand is read from memory (no prologue fusion)")
    k_loop: set[Operation] = set()
    rows: set[SSAValue] = set()
    sources = {op.lhs for op in matmuls if external(op.lhs)}
    for lhs in dict.fromkeys(op.lhs for op in matmuls if not external(op.lhs)):
        ops, leaves = lhs_prologue(lhs, external, set(matmuls))
        k_loop |= ops
        rows |= {v for v in leaves if not external(v)}
        sources |= {v for v in leaves if external(v) and shape_of(v.type) == shape_of(lhs.type)}
    for v in rows:
        _no_product_before(v, matmuls, external)
    for red in reductions:
        if isinstance(red, (tta.ArgReduceOp, tta.ScanOp)):
            raise NotFusable(f"{red.name} is not computed in a matmul's K loop")
        source, chain = row_prologue(red, lambda v: not external(v))
        if source not in sources:
            raise NotFusable("a matmul kernel reduces the rows of its left operand (or of an array its prologue "
                             "reads) only")
        k_loop.update(chain)
    return k_loop


def lhs_prologue(lhs: SSAValue, external: Callable[[SSAValue], bool],
                 matmuls: set[Operation]) -> tuple[set[Operation], list[SSAValue]]:
    """The ops computing left operand `lhs [..., M, K]` that vary along K (elementwise, each used only by
    these ops or as the left operand of `matmuls`), and the values they read: arrays in memory and per-row
    values (one per row: last dim 1), each broadcasting into `lhs`; scalar constants are left out."""
    shape = shape_of(lhs.type)
    if len(shape) < 2 or shape[-1] < 2:
        raise NotFusable("a computed matmul operand needs a K axis to loop over")
    ops: set[Operation] = set()
    leaves: list[SSAValue] = []
    pending = [lhs]
    while pending:
        value = pending.pop()
        if is_scalar_constant(value) or value in leaves or (isinstance(value, OpResult) and value.op in ops):
            continue
        v_shape = shape_of(value.type)
        if len(v_shape) > len(shape) or any(d not in (1, s) for d, s in zip(reversed(v_shape), reversed(shape))):
            raise NotFusable(f"a value of shape {v_shape} does not broadcast into the matmul operand {shape}")
        if external(value) or not v_shape or v_shape[-1] == 1:
            leaves.append(value)
            continue
        op = value.op
        if not isinstance(op, K_LOOP_OPS):
            raise NotFusable(f"{op.name} cannot be computed in a matmul's K loop")
        ops.add(op)
        pending.extend(op.operands)
    for op in ops:
        if any(u.operation not in ops and not (u.operation in matmuls and u.index == 0) for u in op.results[0].uses):
            raise NotFusable("a value of a matmul's K loop is used outside it")
    return ops, leaves


def _no_product_before(value: SSAValue, matmuls: Sequence[tta.MatmulOp], external: Callable[[SSAValue], bool]) -> None:
    """A per-row value read by a prologue is computed before the loop: it cannot depend on a product."""
    pending, seen = [value], set()
    while pending:
        v = pending.pop()
        if external(v) or v in seen or not isinstance(v, OpResult):
            continue
        seen.add(v)
        if v.op in matmuls:
            raise NotFusable("a matmul's prologue reads a value computed from the product")
        pending.extend(v.op.operands)


def row_prologue(red: Operation, inside: Callable[[SSAValue], bool]) -> tuple[SSAValue, list[Operation]]:
    """`red` reduces the last axis of an elementwise function of one array read from memory (`sum(x * x)`
    of RMSNorm): that array and the elementwise ops in program order. Other operands must be scalar
    constants, and no op of the chain may be used outside it."""
    if not isinstance(red, tta.ReduceOp) or red.axis.value.data != len(shape_of(red.input.type)) - 1:
        raise NotFusable("a matmul kernel reduces only the last axis of its left operand")
    chain: list[Operation] = []
    value = red.input
    while inside(value):
        op = value.op
        if not isinstance(op, (tta.BinaryOp, tta.UnaryOp, tta.CastOp)) or shape_of(op.results[0].type) != shape_of(
            red.input.type
        ):
            raise NotFusable(f"{op.name} cannot be computed in a matmul's K loop")
        if any(u.operation is not red and u.operation not in chain for u in op.results[0].uses):
            raise NotFusable("a value of a matmul's K loop is used outside it")
        chain.insert(0, op)
        rest = {v for v in op.operands if not is_scalar_constant(v)}
        if len(rest) != 1:
            raise NotFusable("a matmul's row reduction reads one array")
        value = rest.pop()
    if shape_of(value.type) != shape_of(red.input.type):
        raise NotFusable("a matmul's row reduction reads one array")
    return value, chain


def row_prologue_map(dom: Any, red: tta.ReduceOp) -> tuple[int | None, ...]:
    """Map of a row reduction of a left operand `[..., M, K]` in domain `dom` (a `Domain`): its batch axes
    and M, as the product's."""
    shape = shape_of(red.input.type)
    n, k = len(dom.shape), len(shape)
    out: list[int | None] = [None if d == 1 else n - k + j for j, d in enumerate(shape[:-1])]
    if red.keeps_dims:
        out.append(None)
    if any(a is not None and (a < 0 or dom.shape[a] != shape[j]) for j, a in enumerate(out[: k - 1])):
        raise NotFusable(f"row reduction {shape} does not fit the product {dom.shape}")
    return tuple(out)
