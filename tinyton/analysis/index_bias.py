"""Index biases: float arrays of the scores' shape computed from `tt.arange` and one value a program (a slope per
head), which the attention kernels compute from a block's indices instead of reading: ALiBi's `slope[h] * (j - i)`
(Press et al.) in every spelling, `-slope[h] * abs(i - j)` of encoders, a distance clipped to a window.

A bias is a tree of elementwise arithmetic (`BIAS_OPS`) whose leaves are affine index expressions of the queries and
keys (index_masks.Affine: aranges, integer constants, one-element integer inputs), constants, and arrays constant along
both (`[H, 1, 1]`: `program_leaf`, one value a program). The kernel replays the tree in the program's element types
(tinyton/lowering/fusion/attention_scores.py), so the values it adds are those the program would have stored: the
bias costs a few instructions an element where it cost `[H, S, S]` values read (512 MiB a call in fp32 at S = 2048
and 32 heads).
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import IntegerType, i1
from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.index_masks import Affine, affine_index, index_mask, is_constant, is_scalar_leaf, mask_ops
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, is_float, shape_of

BIAS_OPS = (tta.AddOp, tta.SubOp, tta.MulOp, tta.DivOp, tta.NegOp, tta.AbsOp, tta.MaximumOp, tta.MinimumOp,
            tta.CastOp, tta.ReshapeOp, tta.BroadcastToOp)  # fmt: skip
"""What an index bias is computed with (integer products and quotients only as affine index expressions: an index
product could wrap in the kernel's 32 bits where the program's 64 did not)."""

MAX_BIAS_OPS = 24
"""Ops an index bias may take: each runs on every score the kernel computes."""


def program_leaf(value: SSAValue) -> bool:
    """An array constant along the queries and the keys (its last two dims 1, or one element): one value each program
    reads for its batch entry (a slope per head)."""
    shape = shape_of(value.type)
    return element_type(value.type) != i1 and (prod(shape) == 1 or len(shape) >= 2 and shape[-2:] == (1, 1))


def index_affine(value: SSAValue) -> Affine | None:
    """`value` as an affine expression of the queries' and keys' indices alone (coefficients on the last two
    positions), or None."""
    affine = affine_index(value)
    return affine if affine is not None and all(p in (-1, -2) for p, _ in affine.coef) else None


def index_bias(value: SSAValue) -> bool:
    """Whether `value` is an index bias: a float array computed by `BIAS_OPS` from affine index expressions of the
    queries and keys, constants and `program_leaf` arrays, varying along the queries or the keys."""
    if not isinstance(value, OpResult) or not is_float(element_type(value.type)) or program_leaf(value):
        return False
    found = _tree(value, {})
    return found is not None and found[1]


def _tree(value: SSAValue, memo: dict[SSAValue, tuple[frozenset[Operation], bool] | None]
          ) -> tuple[frozenset[Operation], bool] | None:
    """The ops of the bias tree of `value` (its leaves' ops not included) and whether an index leaf varies along the
    queries or the keys; None when `value` is no such tree or takes more than MAX_BIAS_OPS ops."""
    if value not in memo:
        memo[value] = _node(value, memo)
    return memo[value]


def _node(value: SSAValue, memo: dict[SSAValue, tuple[frozenset[Operation], bool] | None]
          ) -> tuple[frozenset[Operation], bool] | None:
    affine = index_affine(value) if isinstance(element_type(value.type), IntegerType) else None
    if affine is not None:
        return frozenset(), bool(affine.coef)
    if is_constant(value) or program_leaf(value) and not _from_leaves(value):
        return frozenset(), False
    op = value.op if isinstance(value, OpResult) else None
    if op is None or not _bias_step(op):
        return None
    ops, varies = {op}, False
    for operand in op.operands:
        inner = _tree(operand, memo)
        if inner is None:
            return None
        ops |= inner[0]
        varies = varies or inner[1]
    return (frozenset(ops), varies) if len(ops) <= MAX_BIAS_OPS else None


def _bias_step(op: Operation) -> bool:
    """An op the kernel replays as the program computes it: one of BIAS_OPS, exact on integers, moving no axis."""
    return isinstance(op, BIAS_OPS) and _exact_int(op) and _keeps_positions(op)


def _exact_int(op: Operation) -> bool:
    """Integer steps the kernel computes as the program does: no products or quotients of indices (left to the affine
    leaves), no narrowing casts."""
    result = element_type(op.results[0].type)
    if not isinstance(result, IntegerType):
        return True
    if isinstance(op, (tta.MulOp, tta.DivOp)):
        return False
    if isinstance(op, tta.CastOp):
        source = element_type(op.input.type)
        return isinstance(source, IntegerType) and source != i1 and result.width.data >= source.width.data
    return True


def _keeps_positions(op: Operation) -> bool:
    """Whether a reshape or broadcast in the tree only broadcasts (right-aligned, as NumPy does): the kernel evaluates
    every step on the block's `[rows, cols]` and reads the leaves at its batch entry, so no step may move an axis."""
    if not isinstance(op, (tta.ReshapeOp, tta.BroadcastToOp)):
        return True
    have, want = shape_of(op.input.type), shape_of(op.results[0].type)
    have = have[next((i for i, n in enumerate(have) if n != 1), len(have)):]  # leading 1s dropped move nothing
    return len(have) <= len(want) and all(h in (1, w) for h, w in zip(reversed(have), reversed(want)))


def _from_leaves(value: SSAValue) -> bool:
    """A program leaf computed by a bias step from program leaves and constants (torch's rules cast a slope to
    float64): the kernel computes it too, reading what it is computed from."""
    op = value.op if isinstance(value, OpResult) else None
    return op is not None and _bias_step(op) and all(program_leaf(v) or is_constant(v) for v in op.operands)


def is_leaf(value: SSAValue) -> bool:
    """A value the bias reads as it is: a program leaf not computed from constants, aranges or other leaves."""
    integer = isinstance(element_type(value.type), IntegerType)
    return (program_leaf(value) and not is_constant(value) and not (integer and index_affine(value) is not None)
            and not _from_leaves(value))  # fmt: skip


def bias_ops(value: SSAValue) -> list[Operation]:
    """The ops computing index bias `value` in program order (its program leaves' and one-element inputs' left out),
    to clone into the attention region."""
    seen: list[Operation] = []

    def visit(v: SSAValue) -> None:
        if not isinstance(v, OpResult) or v.op in seen or is_scalar_leaf(v) or is_leaf(v):
            return
        for operand in v.op.operands:
            visit(operand)
        seen.append(v.op)

    visit(value)
    return seen


def from_indices(value: SSAValue) -> bool:
    """Whether the kernel computes `value` from a block's indices: an index mask or an index bias."""
    return index_mask(value) is not None or index_bias(value)


def index_ops(value: SSAValue) -> list[Operation]:
    """The ops computing index mask or bias `value`, in program order (to clone into the attention region)."""
    return mask_ops(value) if index_mask(value) is not None else bias_ops(value)
