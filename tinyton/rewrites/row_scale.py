"""`tinyton-row-scale`: move a per-row scale of a matmul's left operand behind the matmul.

Takes and gives: a module of `func.func`s of tta ops (before fusion).

`(x * s) @ w == (x @ w) * s` when `s` is constant along the rows' last axis (shape `[..., 1]`): the scale
of each row of `x` scales the same row of the product. RMSNorm is the case that matters:
`rmsnorm(x) @ w = x * r @ w` with `r = rsqrt(mean(x * x) + eps)`; after the rewrite the matmul reads `x`
itself, `r` is a reduction over the matmul's own K axis (computed in its K loop, tinyton/analysis/domain.py)
and the scale is an epilogue, so the norm and the projection are one kernel. Applied only when every user
of `x * s` is such a matmul (otherwise `x * s` is computed anyway and the scale stays where it is).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.rewrites.outline import functions


def _row_scaled(op: tta.MulOp) -> tuple[SSAValue, SSAValue] | None:
    """`(x, s)` when `op` is `x * s` (either order) with `s` one value per row of `x`."""
    out = shape_of(op.result.type)
    for x, s in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        xs, ss = shape_of(x.type), shape_of(s.type)
        if xs == out and len(xs) >= 2 and xs[-1] > 1 and ss and ss[-1] == 1 and len(ss) <= len(xs):
            return x, s
    return None


def _hoistable(op: tta.MulOp) -> tuple[SSAValue, SSAValue] | None:
    found = _row_scaled(op)
    users = [u.operation for u in op.result.uses]
    if found is None or not users:
        return None
    for user in users:
        if not isinstance(user, tta.MatmulOp) or user.lhs != op.result or user.rhs == op.result:
            return None
        out = shape_of(user.result.type)
        if tta.broadcast_shapes(out, shape_of(found[1].type)) != out:
            return None
    return found


def hoist_row_scales(module: ModuleOp) -> int:
    """Rewrite every hoistable `(x * s) @ w` in place; returns how many matmuls changed."""
    count = 0
    for fn in functions(module):
        for op in list(fn.body.block.ops):
            if not isinstance(op, tta.MulOp) or (found := _hoistable(op)) is None:
                continue
            x, s = found
            for use in list(op.result.uses):
                matmul = use.operation
                product = tta.MatmulOp(x, matmul.rhs)
                scaled = tta.MulOp(product, s)
                Rewriter.insert_op([product, scaled], InsertPoint.before(matmul))
                scaled.result.name_hint = matmul.result.name_hint
                matmul.result.replace_all_uses_with(scaled.result)
                Rewriter.erase_op(matmul)
                count += 1
            Rewriter.erase_op(op)
    return count


@dataclass(frozen=True)
class RowScalePass(ModulePass):
    """`(x * s) @ w -> (x @ w) * s` for row scales `s` (RMSNorm into the projection that follows it)."""

    name = "tinyton-row-scale"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        hoist_row_scales(op)
