"""`tinyton-split-heads`: a projection split into attention heads is a matmul batched over the heads.

Takes and gives: a module of `func.func`s of tta ops (before fusion).

`swapaxes((x @ w).reshape(..., M, G, D), -3, -2)` (x `[..., M, K]`, w `[K, G * D]` or `W.T`, casts or other
unary ops of the product in between) is the array `x.reshape(..., 1, M, K) @ w_heads`, where `w_heads[g]` is
`w[:, g * D : (g + 1) * D]`: `[G, K, D]`, a view of the weight. Written that way the product is laid out as
the heads are, the head dim innermost, so what a model computes per head after the projection (RoPE's
rotation, the cast and the store of a new KV-cache row) is an elementwise epilogue of the projection's kernel:
its domain holds the heads (a reshape of the product that splits the last axis would need memory,
tinyton/analysis/domain.py). Heads read as they are (by an attention) keep the plain product, which stays a
sibling of the other projections of its input.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type, shape_of, tile_type
from tinyton.rewrites.outline import erase_dead_ops, functions


def _product_chain(value: SSAValue) -> tuple[tta.MatmulOp, list[Operation]] | None:
    """The matmul `value` comes from through single-use unary ops (casts), and those ops in program order."""
    chain: list[Operation] = []
    while isinstance(value, OpResult) and value.has_one_use() and isinstance(value.op, (tta.CastOp, tta.UnaryOp)):
        chain.insert(0, value.op)
        value = value.op.input
    if isinstance(value, OpResult) and value.has_one_use() and isinstance(value.op, tta.MatmulOp):
        return value.op, chain
    return None


def _weight_heads(add, b: SSAValue, heads: int, d: int) -> SSAValue:
    """`[G, K, D]` view of a `[K, G * D]` right operand: of `W` itself when the operand is `W.T`."""
    k = shape_of(b.type)[0]
    if isinstance(b, OpResult) and isinstance(b.op, tta.TransposeOp) and b.op.perm == (1, 0):
        return add(tta.TransposeOp(add(tta.ReshapeOp(b.op.input, (heads, d, k))), (0, 2, 1)))
    return add(tta.TransposeOp(add(tta.ReshapeOp(b, (k, heads, d))), (1, 0, 2)))


PER_HEAD = (tta.BinaryOp, tta.UnaryOp, tta.CastOp, tta.WhereOp, tta.CmpOp, tta.SliceOp)
"""Users of the heads that compute on them (an attention reading them as they are needs no split: its
kernel reads the projection's heads through a view, and the projection stays a sibling of the others)."""


def split_heads(t: tta.TransposeOp) -> bool:
    """Rewrite the heads transpose `t` of a projection as a product batched over the heads, when something is
    computed per head after it; True if done."""
    r = t.input
    if not (isinstance(r, OpResult) and isinstance(r.op, tta.ReshapeOp) and r.has_one_use()):
        return False
    if not any(isinstance(u.operation, PER_HEAD) for u in t.result.uses):
        return False
    found = _product_chain(r.op.input)
    if found is None:
        return False
    matmul, chain = found
    out, split = shape_of(matmul.result.type), shape_of(r.type)
    a, b = matmul.lhs, matmul.rhs
    nb = len(out) - 2
    if (len(shape_of(b.type)) != 2 or len(split) != nb + 3 or split[: nb + 1] != out[:-1]
            or split[-2] * split[-1] != out[-1] or t.perm != (*range(nb), nb + 1, nb, nb + 2)
            or len(shape_of(a.type)) != len(out)):  # fmt: skip
        return False

    def add(op: Operation) -> SSAValue:
        op.location = t.location
        Rewriter.insert_op(op, InsertPoint.before(t))
        return op.results[0]

    heads, d = split[-2:]
    *batch, m, k = shape_of(a.type)
    value = add(tta.MatmulOp(add(tta.ReshapeOp(a, (*batch, 1, m, k))), _weight_heads(add, b, heads, d)))
    for op in chain:
        shape = shape_of(value.type)
        value = add(type(op).create(operands=[value], result_types=[tile_type(element_type(op.results[0].type), shape)],
                                    properties=dict(op.properties), attributes=dict(op.attributes)))
    t.result.replace_all_uses_with(value)
    Rewriter.erase_op(t)
    return True


@dataclass(frozen=True)
class SplitHeadsPass(ModulePass):
    """Projections split into heads become matmuls batched over the heads (module docstring)."""

    name = "tinyton-split-heads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        for fn in functions(op):
            done = [split_heads(t) for t in list(fn.body.block.ops) if isinstance(t, tta.TransposeOp)]
            if any(done):
                erase_dead_ops(fn)
