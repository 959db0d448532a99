"""The attention backward rewrite: the textbook gradient math of an array program (tinyton/analysis/
attention_backward.py) becomes one region of kind "attention_backward", which the kernel generator
(tinyton/lowering/fusion/attention_backward.py) turns into FlashAttention-2's backward: a delta kernel, a
dk/dv kernel over key blocks and a dq kernel (after the forward kernel, which also saves the rows'
logsumexp, when the program computes the probabilities itself). No S x S array is ever stored.

Run by `tinyton-fuse-patterns` (and so `tinyton-fuse` and `tinyton-flash-attention`) before the PDL
patterns: the backward claims the forward's softmax, which then no forward pattern sees alone.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import OpResult

from tinyton.analysis.attention_backward import (
    AttentionBackward,
    find_backward,
    same_array,
)
from tinyton.analysis.index_bias import from_indices
from tinyton.dialects import tta
from tinyton.rewrites.attention import own_copy
from tinyton.rewrites.outline import Group, convex

KIND = "attention_backward"


def backward_groups(fn: func.FuncOp) -> list[Group]:
    """One group per attention backward in `fn`, its index masks and biases cloned for it (as the forward's are)."""
    groups: list[Group] = []
    claimed: set = set()
    for op in reversed(list(fn.body.block.ops)):
        if not isinstance(op, tta.MulOp) or op in claimed or (found := find_backward(op)) is None:
            continue
        _one_array_each(found)
        for step in found.scores.steps:
            for value in step.others:
                if from_indices(value):
                    own_copy(step.op, value)
        found = find_backward(op)
        if found is None or not claimed.isdisjoint(found.ops):
            continue
        order = {o: i for i, o in enumerate(fn.body.block.ops)}
        ops = sorted((o for o in found.ops if not isinstance(o, tta.ConstantOp)), key=order.__getitem__)
        if not convex(set(ops), order):
            continue  # do computed from o (a network's training step): the forward must run before the backward
        claimed.update(ops)
        groups.append((ops, KIND))
    return groups


def _one_array_each(found: AttentionBackward) -> None:
    """Point the gradient products at the forward's k, q and do where they read the same view written
    again (`same_array`): the region then has one input per array, as the kernels read it."""
    scores = found.scores
    for grad, array in ((found.dq, scores.k), (found.dk, scores.qk.lhs), (found.dv, found.do)):
        value, reader, index = grad.matmul.rhs, grad.matmul, 1
        while isinstance(value, OpResult) and isinstance(value.op, tta.CastOp):
            value, reader, index = value.op.input, value.op, 0
        if value != array and value != scores.q.base and same_array(value, array):
            reader.operands[index] = array
