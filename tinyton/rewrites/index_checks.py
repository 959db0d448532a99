"""`tinyton-check-indices`: a gather of `arange(0, n)` along its one axis is its indices, checked.

Takes and gives: a module of `func.func`s of tta ops (before fusion). `take(arange(0, n), i)` is `arange(n)[i]`:
each index itself, negative ones counted from the end, one outside `[-n, n)` NumPy's IndexError; that is
`tta.check_index i size = n`, elementwise. The gather needed its table in memory (a kernel writing the arange, one
gathering it); the check fuses into the index's readers: torch's scatters read their indices through it
(tinyton/torch/scatter_rules.py `checked_index`), and a scatter is one kernel again.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import OpResult
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.rewrites.outline import erase_dead_ops, functions


class GatherOfArange(RewritePattern):
    """`take(arange(0, n), i, axis=0)` → `check_index(i, n)` (the same int32 values and errors)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tta.TakeOp, rewriter: PatternRewriter) -> None:
        table = op.table
        if not isinstance(table, OpResult) or not isinstance(table.op, tta.ArangeOp):
            return
        if table.op.start.value.data != 0 or op.axis.value.data != 0:
            return
        rewriter.replace(op, tta.CheckIndexOp(op.indices, table.op.end.value.data))


def check_indices(module: ModuleOp) -> None:
    """Every gather of an arange from 0 made an index check; the aranges no longer read dropped."""
    PatternRewriteWalker(GatherOfArange()).rewrite_module(module)
    for fn in functions(module):
        erase_dead_ops(fn)


@dataclass(frozen=True)
class CheckIndicesPass(ModulePass):
    """Gathers of `arange(0, n)` as elementwise index checks, which fuse where the gathers needed memory."""

    name = "tinyton-check-indices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        check_indices(op)
