"""What a matmul kernel computes in its K loop besides the products: row statistics and the left operand.

A matmul region's domain is its product `[..., M, N]`; its K loop reads `[BM, BK]` tiles of the left operand.
Two kinds of values vary along K, so they live in that loop and get no map in the domain:
- row statistics: a reduction along K of an elementwise chain of one array read from memory, accumulated from K
  tiles: RMSNorm's `mean(x * x)` over the last axis of `x [..., M, K]`, in the product's own loop when `x` is the
  left operand, else in a loop before it (`row_prologue`); `dy.sum(0)` beside `dy.T @ x`, a linear layer's bias
  gradient beside its weight gradient, is a sum over K of the left operand `dy.T` too, its elements read in the
  other order (`permuted_map`), stored once by the programs of the first column tile;
- the left operand's prologue: a left operand computed in the group (RMSNorm's `(x * r * w).astype(bf16)`,
  the cast of an attention output to the projection's type) is evaluated per K tile, exactly as written,
  from tiles of arrays in memory, scalar constants and per-row values of the domain (`r`, computed before
  the loop from row statistics), so it is never written to memory (`lhs_prologue`).
The lowering is tinyton/lowering/fusion/matmul.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.not_fusable import NotFusable
from tinyton.analysis.views import View
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of

K_LOOP_OPS = (tta.BinaryOp, tta.UnaryOp, tta.CastOp, tta.WhereOp, tta.CmpOp)
"""Elementwise ops a K loop evaluates on `[BM, BK]` tiles."""


def is_scalar_constant(v: SSAValue) -> bool:
    return isinstance(v, OpResult) and isinstance(v.op, tta.ConstantOp) and not shape_of(v.type)


K_AXIS = -1
"""In a K-loop map: the dim runs along the K loop (not a domain axis)."""

PROLOGUE_MAX_ROWS = 64
"""Most rows of a left operand computed in the K loop (a decode batch's normed tokens). Every column tile's
program evaluates it again, from tiles loaded into registers beside the tensor-core pipeline; with more rows a
kernel of its own that stores it is cheaper. On the H200 (2026-12-03) Qwen2.5-7B's 512-row RMSNorm into the
gate/up projections with SwiGLU ran at 192 TFLOPS (724 µs), TinyLlama's 128-row RMSNorm into the q
projection took 22.7 µs where the projection alone took 8.9."""


def left_rows(lhs: SSAValue) -> int:
    """The rows of a left operand `[..., M, K]` (its batch dims included): how many the prologue computes."""
    return prod(shape_of(lhs.type)[:-1])


@dataclass
class KLoop:
    """What a matmul kernel computes in its K loops: the ops, and per value they read or compute (and per
    row statistic) a map onto the product's axes (`K_AXIS`: along K; None: size 1)."""

    ops: set[Operation] = field(default_factory=set)
    maps: dict[SSAValue, tuple[int | None, ...]] = field(default_factory=dict)


def check_matmul(matmuls: Sequence[tta.MatmulOp], reductions: Sequence[Operation],
                 external: Callable[[SSAValue], bool], views: Mapping[SSAValue, View]) -> KLoop:
    """One matmul with elementwise epilogues, or sibling matmuls (one output shape, an operand in common,
    as q/k/v projections of one input): one K loop each over the same output tile, one launch. Right
    operands are read from memory; a left operand is read from memory or computed by a prologue
    (`lhs_prologue`). The reductions must be statistics along K (`row_prologue`) of a left operand read
    from memory (through any view of its elements: `views`) or of an array a prologue reads."""
    first = matmuls[0]
    for op in matmuls[1:]:
        if shape_of(op.result.type) != shape_of(first.result.type) or not set(op.operands) & set(first.operands):
            raise NotFusable("matmuls share a kernel only as siblings: one output shape, an operand in common")
    if not all(external(op.rhs) for op in matmuls):
        raise NotFusable("a matmul's right operand is read from memory (no prologue fusion)")
    n = len(shape_of(first.result.type))
    loop = KLoop()
    for lhs in dict.fromkeys(op.lhs for op in matmuls):
        if external(lhs):
            loop.maps[lhs] = _operand_map(shape_of(lhs.type), n)
        elif left_rows(lhs) > PROLOGUE_MAX_ROWS:
            raise NotFusable(f"a left operand of {left_rows(lhs)} rows is computed by a kernel of its own (a prologue "
                             f"computes at most {PROLOGUE_MAX_ROWS})")
        else:
            ops, maps = lhs_prologue(lhs, external, set(matmuls), n)
            loop.ops |= ops
            for v, m in maps.items():
                if loop.maps.setdefault(v, m) != m:
                    raise NotFusable("siblings' prologues read one array along different axes")
    for v, m in loop.maps.items():
        if not external(v) and m[-1:] != (K_AXIS,):
            _no_product_before(v, matmuls, external)
    for red in reductions:
        if isinstance(red, (tta.ArgReduceOp, tta.ScanOp, tta.SortingOp)):
            raise NotFusable(f"{red.name} is not computed in a matmul's K loop")
        source, chain = row_prologue(red, lambda v: not external(v))
        m = loop.maps.get(source)
        for lhs in dict.fromkeys(op.lhs for op in matmuls if external(op.lhs)):
            m = m or permuted_map(_view(source, views), _view(lhs, views), loop.maps[lhs])
        axis = red.axis.value.data
        if m is None or m[axis] != K_AXIS:
            raise NotFusable("a matmul kernel reduces its left operand (or an array its prologue reads) along K only")
        loop.ops.update(chain)
        loop.maps[source] = m
        loop.maps[red.result] = tuple(None if j == axis else a for j, a in enumerate(m) if j != axis or red.keeps_dims)
    return loop


def _view(value: SSAValue, views: Mapping[SSAValue, View]) -> View:
    return views.get(value) or View.of(value)


def permuted_map(source: View, lhs: View, lhs_map: tuple[int | None, ...]) -> tuple[int | None, ...] | None:
    """The K-loop map of an array read as `source` when it holds exactly the elements of a left operand read as
    `lhs` (mapped `lhs_map`), its dims in any order: each dim is the left operand's dim of its extent and stride
    (`dy` and `dy.T` of `dy.T @ x`). None when it holds other elements, or a dim is ambiguous (broadcast)."""
    if (source.base is not lhs.base or source.offset != lhs.offset or source.bounds is not None
            or lhs.bounds is not None or source.pieces is not None or lhs.pieces is not None):
        return None
    wide = [(n, st) for n, st in zip(lhs.shape, lhs.strides) if n != 1]
    dims = {(n, st): a for (n, st), a in zip(zip(lhs.shape, lhs.strides), lhs_map) if n != 1}
    if len(dims) != len(wide) or any(st == 0 for _, st in wide):
        return None
    out: list[int | None] = []
    for n, st in zip(source.shape, source.strides):
        if n != 1 and (n, st) not in dims:
            return None
        out.append(None if n == 1 else dims.pop((n, st)))
    return None if dims else tuple(out)


def _operand_map(shape: Sequence[int], n: int) -> tuple[int | None, ...]:
    """A left operand `[..., M, K]` in a product of rank `n`: batch dims and M right-aligned, K along the loop."""
    r = len(shape)
    return tuple(None if d == 1 else K_AXIS if i == r - 1 else n - r + i for i, d in enumerate(shape))


def _broadcast_map(shape: Sequence[int], out_shape: Sequence[int], out: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """The map of an operand of `shape` broadcast (NumPy, trailing dims) into a result of `out_shape` mapped `out`."""
    k = len(out_shape) - len(shape)
    if k < 0 or any(d not in (1, e) for d, e in zip(shape, out_shape[k:])):
        raise NotFusable(f"a value of shape {tuple(shape)} does not broadcast into {tuple(out_shape)}")
    return tuple(None if d == 1 else out[k + j] for j, d in enumerate(shape))


def _reshape_map(shape: Sequence[int], out_shape: Sequence[int], out: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """The map of the input of a reshape that only adds or removes size-1 dims."""
    if [d for d in shape if d != 1] != [d for d in out_shape if d != 1]:
        raise NotFusable("a reshape in a matmul's prologue may only add or remove size-1 dims")
    moved = iter(a for a, d in zip(out, out_shape) if d != 1)
    return tuple(next(moved) if d != 1 else None for d in shape)


def lhs_prologue(lhs: SSAValue, external: Callable[[SSAValue], bool], matmuls: set[Operation],
                 n: int) -> tuple[set[Operation], dict[SSAValue, tuple[int | None, ...]]]:
    """The ops computing left operand `lhs [..., M, K]` of products of rank `n` that vary along K
    (elementwise ops and reshapes adding or removing size-1 dims, each used only by these ops or as the
    left operand of `matmuls`), and the map of every value they compute or read: arrays in memory, and
    per-row values (last dim 1, from the domain); scalar constants are left out."""
    shape = shape_of(lhs.type)
    if len(shape) < 2 or shape[-1] < 2:
        raise NotFusable("a computed matmul operand needs a K axis to loop over")
    ops: set[Operation] = set()
    maps: dict[SSAValue, tuple[int | None, ...]] = {}
    pending = [(lhs, _operand_map(shape, n))]
    while pending:
        value, m = pending.pop()
        if is_scalar_constant(value):
            continue
        if value in maps:
            if maps[value] != m:
                raise NotFusable("a matmul's prologue reads one value along different axes")
            continue
        maps[value] = m
        v_shape = shape_of(value.type)
        if external(value) or m[-1:] != (K_AXIS,):
            continue  # read from memory, or a per-row value of the domain
        op = value.op
        if isinstance(op, tta.ReshapeOp):
            pending.append((op.input, _reshape_map(shape_of(op.input.type), v_shape, m)))
        elif isinstance(op, K_LOOP_OPS):
            pending += [(v, _broadcast_map(shape_of(v.type), v_shape, m)) for v in op.operands]
        else:
            raise NotFusable(f"{op.name} cannot be computed in a matmul's K loop")
        ops.add(op)
    for op in ops:
        if any(u.operation not in ops and not (u.operation in matmuls and u.index == 0) for u in op.results[0].uses):
            raise NotFusable("a value of a matmul's K loop is used outside it")
    return ops, maps


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
    """`red` reduces an elementwise function of one array read from memory (`sum(x * x)` of RMSNorm): that
    array and the elementwise ops in program order. Other operands must be scalar constants, and no op of the
    chain may be used outside it. (Whether the axis runs along a K loop is the caller's question.)"""
    if not isinstance(red, tta.ReduceOp):
        raise NotFusable(f"{red.name} is not computed in a matmul's K loop")
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
