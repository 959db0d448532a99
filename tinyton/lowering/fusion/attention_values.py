"""Float8 attention's transposed values: a float8 `p @ v` (the probabilities cast to v's float8 type) runs on e4m3
or e5m2 wgmma, which reads both operands K-major, so v's blocks must be read with their keys contiguous. A v stored
the usual way (keys a row apart) is first copied transposed by a kernel of its own (`emit_value_transpose`), and the
flash kernel reads the copy as a v stored transposed (`BlockReads._values_transposed`): whole rows by `cp.async`, as
k's, where the kernel had gathered v a byte at a time in every step of its KV loop. FlashAttention-3 transposes in
the kernel, in shared memory, with its producer warps. A grouped-query v (broadcast along the group's axis) is copied
once for each key/value head, not for each query head: the copy keeps v's batch shape, and the flash kernel reads it
as it reads v, the same copy for every query head of a group.
"""

from __future__ import annotations

from dataclasses import replace

from xdsl.ir import SSAValue

from tinyton.analysis.attention import Attention
from tinyton.analysis.views import contiguous_strides
from tinyton.analysis.strided_views import QView, Stored
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.dialects.tt_types import FLOAT8_TYPES
from tinyton.lowering.fusion.attention import _Program, stored_pointers
from tinyton.lowering.fusion.attention_blocks import Blocks, packed_group_axes
from tinyton.lowering.fusion.attention_reads import keys_contiguous
from tinyton.lowering.fusion.emitter import Emitter


VALUE_TRANSPOSE_BLOCKS = Blocks(64, 64, 4)
"""The value-transposing kernel's programs: 64 keys of v each, on 4 warps (`emit_value_transpose`)."""


def transposes_values(att: Attention) -> bool:
    """Whether the kernel reads v through a transposed copy (`emit_value_transpose`): a float8 `p @ v` (the
    probabilities cast to v's float8 type, an e4m3 or e5m2 wgmma, which reads both operands K-major) of a v whose
    keys lie a row apart. Not for decoding's packed query heads, a v chosen by a select or cast as it is read."""
    v = att.v_stored
    if att.p_cast is None or att.v_select is not None or not isinstance(element_type(att.v.type), FLOAT8_TYPES):
        return False
    if packed_group_axes(att) or v is not None and any(isinstance(op, tta.CastOp) for op in v.ops):
        return False
    return not keys_contiguous(v.view if v is not None else None)


def transposed_values_shape(att: Attention) -> tuple[int, ...]:
    """The transposed copy of v: `(..., D_v, S_kv)` over v's own batch (a grouped-query v's group axis kept as 1:
    the attention's programs read one key/value head's copy for all the query heads of its group)."""
    *batch, s_kv, d_v = shape_of(att.v.type)
    return (*batch, d_v, s_kv)


def emit_value_transpose(em: Emitter, att: Attention, pointers: dict[SSAValue, SSAValue],
                         out: SSAValue) -> tuple[int, int, int]:
    """The kernel that copies v transposed into `out` (`BlockReads.emit_value_transpose`); returns its grid."""
    return _Program(em, att, stored_pointers(att, pointers), VALUE_TRANSPOSE_BLOCKS).emit_value_transpose(out)


def with_transposed_values(att: Attention) -> Attention:
    """`att` reading v as its transposed copy (`transposed_values_shape`), to which the caller points v: over v's
    batch, as v is read (stride 0 along its size-1 axes, a grouped-query v's group axis)."""
    *batch, d_v, s_kv = shape = transposed_values_shape(att)
    *strides, d_stride, key_stride = contiguous_strides(shape)
    strides = [st if n > 1 else 0 for n, st in zip(batch, strides)]
    view = QView(att.v, (), (*batch, s_kv, d_v), (*strides, key_stride, d_stride))
    return replace(att, v_stored=Stored(att.v, (), view))
