"""The native parts of the flash-attention pattern (`attention.pdl.mlir`): what PDL cannot say.

`attention_scores(s)` holds when the scores come from `q @ kᵀ` through elementwise steps each used once
(tinyton/analysis/attention.py decides, the same analysis the kernel generator reads back), and
`outline_attention` outlines the matched softmax and second matmul together with that path into one
`tta.fusion` of kind "attention": one flash-attention kernel (tinyton/lowering/fusion/attention.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerAttr, StringAttr
from xdsl.ir import Operation, SSAValue

from tinyton.analysis.attention import score_chain
from tinyton.dialects.tt import shape_of


def attention_scores(s: SSAValue) -> bool:
    return score_chain(s) is not None


def last_axis(value: SSAValue, axis: IntegerAttr) -> bool:
    return axis.value.data == len(shape_of(value.type)) - 1


def outline_attention(matched: Sequence[Operation], kind: StringAttr, s: SSAValue) -> tuple[list[Operation], str]:
    """The matched ops plus `q @ kᵀ`, the transpose of k and the score steps: one region."""
    chain = score_chain(s)
    assert chain is not None, "checked by the attention_scores constraint"
    qk, transpose, steps = chain
    path = [*([transpose] if transpose is not None else []), qk, *(step.op for step in steps)]
    return [*path, *matched], kind.data
