"""Where an attention kernel stores its output rows: `p @ v`'s `[batch..., S_q, D_v]` in each array the region
writes, in its own row-major layout or through the transposed view a model lays it out in before the output
projection (`Attention.outputs`: `y.transpose(1, 2).reshape(B, S, H * D)` stored as `[B, S, H, D]` directly, so no
kernel copies it). The flash-attention program and flash-decoding's combine (attention_combine.py) share it.

A program knows its batch entry as one flat index over the batch axes that are not packed (grid axis 1) and its
rows as indices over the packed query heads and the queries (attention_blocks.packed_group_axes); where those
axes walk the array with one stride, the offset is one multiply, as in a contiguous output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue

from tinyton.analysis.attention import Attention
from tinyton.analysis.strided_views import QView
from tinyton.dialects import tt
from tinyton.lowering.fusion.attention_blocks import packed_group_axes
from tinyton.lowering.fusion.emitter import Emitter


@dataclass(frozen=True)
class OutputLayout:
    """pv's batch extents, the packed ones among them, S_q, and the element strides of pv's axes in the stored
    array."""

    batch: tuple[int, ...]
    packed: tuple[int, ...]
    s_q: int
    strides: tuple[int, ...]
    offset: int = 0
    """Elements before the view's first (a window of a concatenation)."""

    @staticmethod
    def of(att: Attention, view: QView) -> OutputLayout:
        """The layout of one of `att.outputs`."""
        shape = view.shape
        return OutputLayout(tuple(shape[:-2]), packed_group_axes(att), shape[-2], tuple(view.strides), view.offset)

    def row_offsets(self, em: Emitter, batch_index: SSAValue, rows: SSAValue) -> SSAValue:
        """`[R, 1]` element offsets of rows `rows` (`[R, 1]`) of the flat batch entry `batch_index`."""
        axes = [a for a in range(len(self.batch)) if a not in self.packed]
        first = em.add(flat_offset(em, batch_index, [self.batch[a] for a in axes], [self.strides[a] for a in axes]),
                       em.i32(self.offset) if self.offset else None)
        extents = [*(self.batch[a] for a in self.packed), self.s_q]
        strides = [*(self.strides[a] for a in self.packed), self.strides[-2]]
        return em.binary(tt.AddOp, em.to_shape(first, (1, 1)), flat_offset(em, rows, extents, strides))

    @property
    def column_stride(self) -> int:
        return self.strides[-1]


def flat_offset(em: Emitter, index: SSAValue, extents: Sequence[int], strides: Sequence[int]) -> SSAValue:
    """The element offset of the row-major position `index` over axes of `extents` laid out with `strides`:
    one multiply when the axes (those longer than 1) walk memory with one stride, else a coordinate each."""
    walked = [(n, s) for n, s in zip(extents, strides) if n > 1]
    if not walked:
        return em.mul_int(index, 0)
    if all(walked[i][1] == walked[i + 1][0] * walked[i + 1][1] for i in range(len(walked) - 1)):
        return em.mul_int(index, walked[-1][1])
    offset, rest = None, index
    for i, (n, stride) in enumerate(reversed(walked)):
        last = i == len(walked) - 1
        offset = em.add(offset, em.mul_int(rest if last else em.mod_int(rest, n), stride))
        if not last:
            rest = em.div_int(rest, n)
    assert offset is not None
    return offset
