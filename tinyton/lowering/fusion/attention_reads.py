"""How the flash-attention kernels (attention.py, attention_backward.py) address and read their blocks: a program's
batch coordinates and offsets, the pointers of a tile of any operand (through its broadcast or strided view), and
the key and value blocks as stored: rows of k loaded and transposed for the dot (or kᵀ as it is stored), a strided
view of a KV cache, a `where` between two views chosen by an index mask, a block kept in its stored type for a
prefetching loop to carry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from math import prod

from xdsl.ir import SSAValue

from tinyton.analysis.attention import Attention, Select
from tinyton.analysis.views import contiguous_strides
from tinyton.analysis.strided_views import QView
from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, shape_of
from tinyton.intmath import cdiv
from tinyton.lowering.fusion.attention_blocks import Blocks
from tinyton.lowering.fusion.emitter import Emitter, broadcast_shape

MAX_DESCRIPTOR_RANK = 5
"""Dims a TMA tensor map has at most (`cp.async.bulk.tensor.5d`): a descriptor read's batch dims of more than one
entry, then rows and columns."""


def keys_contiguous(view: QView | None) -> bool:
    """Whether a k or v read through `view` (None: its own row-major layout) has its keys, not its columns, a stride
    of 1 apart: stored transposed."""
    return view is not None and view.shape[-2] > 1 and view.strides[-2] == 1 and view.strides[-1] != 1


class BlockReads:
    """The addressing and block reads of `attention._Program`, which provides the emitter, the region, the blocks,
    the kernel's pointers and sizes, and the masks' helpers."""

    em: Emitter
    att: Attention
    blocks: Blocks
    pointers: dict[SSAValue, SSAValue]
    batch: tuple[int, ...]
    packed: tuple[int, ...]
    coords: list[SSAValue]
    bn: int
    d: int
    d_v: int
    dp: int
    dvp: int
    s_kv: int
    _below: Callable[..., SSAValue | None]
    _columns: Callable[..., tuple[SSAValue, SSAValue | None]]
    _mask_tile: Callable[..., SSAValue]

    def _batch_coords(self, flat: SSAValue, axes: list[int] | None = None) -> list[SSAValue]:
        """The batch coordinates of the program's flat batch index, row-major over `axes` (None: all but the packed
        axes, whose heads are rows); the other axes' are 0."""
        coords = [self.em.i32(0)] * len(self.batch)
        axes = [i for i in range(len(self.batch)) if i not in self.packed] if axes is None else axes
        self._decompose(flat, axes, coords)
        return coords

    def _decompose(self, flat: SSAValue, axes: list[int], coords: list[SSAValue]) -> None:
        """Set `coords` along `axes` to the row-major coordinates of the index `flat` over their extents."""
        em, rest = self.em, flat
        for n, i in enumerate(reversed(axes)):
            last = n == len(axes) - 1
            coords[i] = rest if last else em.mod_int(rest, self.batch[i])
            if not last:
                rest = em.div_int(rest, self.batch[i])

    def batch_offset(self, value: SSAValue, view: QView | None = None) -> SSAValue:
        """Element offset of this program's batch entry in `value` (broadcast dims have stride 0), or in
        the strided `view` of it (from its offset)."""
        shape = view.shape if view else shape_of(value.type)
        strides = view.strides if view else contiguous_strides(shape)
        lead = shape[:-2] if len(shape) >= 2 else ()
        offset = self.em.i32(view.offset if view else 0)
        for j, extent in enumerate(lead):
            axis = len(self.batch) - len(lead) + j
            if extent > 1:
                offset = self.em.add(offset, self.em.mul_int(self.coords[axis], strides[j]))
        return offset

    def load(self, value: SSAValue, rows: SSAValue, cols: SSAValue, row_stride: int, col_stride: int,
             mask: SSAValue | None, view: QView | None = None, cast: bool = True) -> SSAValue:
        """`value[batch, rows, cols]` (of its strided `view`, if given) as a tile (rows `[R, 1]`, cols
        `[1, C]`, or transposed: `[1, R]` and `[C, 1]`); masked lanes give 0. `cast=False`: as stored (a k or v in
        another float type, `Stored`)."""
        em = self.em
        ptrs = self.block_pointers(value, rows, cols, row_stride, col_stride, view)
        shape = shape_of(ptrs.type)
        other = em.const(0, self.pointers[value].type.pointee, shape) if mask is not None else None
        tile = em.emit(tt.LoadOp(ptrs, em.to_shape(mask, shape) if mask is not None else None, other))
        return em.cast(tile, element_type(value.type)) if cast else tile  # a k or v stored in another float type

    def block_pointers(self, value: SSAValue, rows: SSAValue, cols: SSAValue, row_stride: int, col_stride: int,
                       view: QView | None = None) -> SSAValue:
        """The pointers of `load`'s tile: `value`'s (or its strided `view`'s) elements at `rows` and `cols` of this
        program's batch entry."""
        em = self.em
        shape = broadcast_shape(shape_of(rows.type), shape_of(cols.type))
        offsets = em.to_shape(self.batch_offset(value, view), (1, 1))
        for index, stride in ((rows, row_stride), (cols, col_stride)):
            if stride:
                offsets = em.binary(tt.AddOp, offsets, em.mul_int(index, stride))
        return em.emit(tt.AddPtrOp(em.to_shape(self.pointers[value], shape), em.to_shape(offsets, shape)))

    def descriptor_view(self, view: QView) -> QView | None:
        """`view` if `descriptor_rows` can read it as a TMA descriptor: rows contiguous along the last dim, from
        offset 0, under at most three batch dims of more than one entry; else None."""
        if view.offset or len(view.shape) < 2 or view.strides[-1] != 1:
            return None
        lead = [n for n, st in zip(view.shape[:-2], view.strides[:-2]) if n > 1 and st]
        return view if len(lead) + 2 <= MAX_DESCRIPTOR_RANK else None

    def descriptor_rows(self, value: SSAValue, view: QView, start: SSAValue, count: int, width: int,
                        padded: int, past_rows: bool = False) -> SSAValue:
        """`count` rows from `start` of `value`'s `[..., rows, width]` array in memory, read through `view`
        (`descriptor_view`), as a `[count, padded]` `tt.descriptor_load` (its batch dims of more than one entry, then
        rows and the last dim: TMA's box on sm_90), as stored; rows past the array's and columns past `width` read 0
        (`past_rows`: whole blocks may start past the rows)."""
        return self.descriptor_block(value, view, (start, self.em.i32(0)), (count, padded), width, past_rows)

    def descriptor_block(self, value: SSAValue, view: QView, start: tuple[SSAValue, SSAValue], box: tuple[int, int],
                         width: int, past_rows: bool = False) -> SSAValue:
        """The `box` (rows, columns) of `value`'s `[..., rows, width]` array in memory from the (row, column) `start`,
        read through `view` (`descriptor_view`) as a `tt.descriptor_load`, as stored; past the array it reads 0 (rows
        are masked where the extent is no multiple of the box's, or `past_rows`)."""
        em = self.em
        lead = [(i, n, st) for i, (n, st) in enumerate(zip(view.shape[:-2], view.strides[:-2])) if n > 1 and st]
        first = len(self.batch) - len(view.shape[:-2])
        rows = em.binary(tt.AddOp, em.to_shape(start[0], (box[0], 1)), em.arange(box[0], 2, 0))
        cols = em.binary(tt.AddOp, em.to_shape(start[1], (1, box[1])), em.arange(box[1], 2, 1))
        extent = view.shape[-2]
        mask = em.and_(em.cmp("lt", rows, em.i32(extent)) if extent % box[0] or past_rows else None,
                       em.cmp("lt", cols, em.i32(width)) if width % box[1] else None)
        ptrs = self.block_pointers(value, rows, cols, view.strides[-2], 1, view)
        element = element_type(self.pointers[value].type).pointee
        return em.emit(tt.DescriptorLoadOp(
            ptrs, em.to_shape(mask, box) if mask is not None else None,
            em.const(0.0, element, box) if mask is not None else None, self.pointers[value],
            [em.i32(n) for _, n, _ in lead] + [em.i32(extent), em.i32(width)],
            [em.i32(st) for _, _, st in lead] + [em.i32(view.strides[-2]), em.i32(1)],
            [self.coords[first + i] for i, _, _ in lead] + list(start), "zero",
        ))

    def _matrix_strides(self, value: SSAValue) -> tuple[int, int]:
        """Strides of `value`'s last two dims seen as a (S_q, S_kv) score operand (0 where it broadcasts)."""
        shape = shape_of(value.type)
        rows = shape[-2] if len(shape) >= 2 else 1
        cols = shape[-1] if shape else 1
        return (cols if rows > 1 else 0), (1 if cols > 1 else 0)

    def _key_block(self, j: SSAValue, bound: SSAValue | None, cast: bool = True, rows: bool = False) -> SSAValue:
        """kᵀ of the key block at `j`, `[D, BN]`: k stored (S_kv, D) is loaded as stored and transposed (the dot
        reads it K-major; the broadcast products take the `[BN, D]` rows as loaded); an already transposed k is
        loaded as it is. `rows`: the block's `[BN, D]` rows instead (the left operand of `k @ qᵀ`). Keys at or
        past `bound` (None: all in range) read 0; `cast=False`: as stored."""
        em, att = self.em, self.att
        if att.k_transposed:
            kv_rows = em.binary(tt.AddOp, em.to_shape(j, (self.bn, 1)), em.arange(self.bn, 2, 0))
            d_cols = em.arange(self.dp, 2, 1)
            row_in = em.cmp("lt", kv_rows, bound) if bound is not None else None
            mask = em.and_(row_in, self._below(d_cols, self.dp, self.d))
            k = self._read(att.k, att.k_select, kv_rows, d_cols, (self.d, 1), mask, cast)
            return k if self.blocks.broadcast or rows else em.emit(tt.TransOp(k, (1, 0)))
        d_rows = em.arange(self.dp, 2, 0)  # [Dp, 1]
        cols = self._columns(j, masked=False)[0]
        col_in = em.cmp("lt", cols, bound) if bound is not None else None
        mask = em.and_(self._below(d_rows, self.dp, self.d), col_in)
        kt = self._read(att.k, att.k_select, d_rows, cols, (self.s_kv, 1), mask, cast)
        return em.emit(tt.TransOp(kt, (1, 0))) if rows else kt

    def _value_block(self, j: SSAValue, bound: SSAValue | None, dv_cols: SSAValue, cast: bool = True) -> SSAValue:
        """The value block at `j`, `[BN, D_v]` (rows at or past `bound` read 0; `cast=False`: as stored). A v
        stored transposed (keys contiguous: `vᵀ.mT`) is read as its `[D_v, BN]` rows and transposed, as k is: the
        dot then reads it K-major (a float8 product's only form) from rows copied whole, not gathered a byte apiece."""
        em = self.em
        if self._values_transposed():
            return em.emit(tt.TransOp(self._value_columns(j, bound, cast), (1, 0)))
        kv_rows = em.binary(tt.AddOp, em.to_shape(j, (self.bn, 1)), em.arange(self.bn, 2, 0))  # [BN, 1]
        v_row_ok = em.cmp("lt", kv_rows, bound) if bound is not None else None
        v_ok = em.and_(v_row_ok, self._below(dv_cols, self.dvp, self.d_v))
        return self._read(self.att.v, self.att.v_select, kv_rows, dv_cols, (self.d_v, 1), v_ok, cast)

    def _value_columns(self, j: SSAValue, bound: SSAValue | None, cast: bool = True) -> SSAValue:
        """vᵀ's block at key `j`, `[D_v, BN]`, read through v's view whatever its layout (keys at or past `bound`,
        None: all in range, read 0)."""
        keys, d_rows, ok = self._column_tile(j, bound)
        return self._read(self.att.v, None, keys, d_rows, (self.d_v, 1), ok, cast)

    def _column_tile(self, j: SSAValue, bound: SSAValue | None) -> tuple[SSAValue, SSAValue, SSAValue | None]:
        """vᵀ's block at key `j` as indices: the keys `[1, BN]`, v's columns `[Dv, 1]`, and which lanes are in range
        (keys below `bound`, columns below D_v; None: all)."""
        em = self.em
        keys = em.binary(tt.AddOp, em.to_shape(j, (1, self.bn)), em.arange(self.bn, 2, 1))
        d_rows = em.arange(self.dvp, 2, 0)
        ok = em.and_(em.cmp("lt", keys, bound) if bound is not None else None, self._below(d_rows, self.dvp, self.d_v))
        return keys, d_rows, ok

    def emit_value_transpose(self, out: SSAValue) -> tuple[int, int, int]:
        """A kernel of its own, before the attention's: each program copies v's keys `[j, j + BN)` (through its
        view, over v's own batch entries: a grouped-query v once per key/value head, not per query head) transposed
        into `out`, a contiguous `(..., D_v, S_kv)` array, which the attention then reads as a v stored transposed
        (`_values_transposed`). A float8 `p @ v` reads v K-major, and v's rows, keys a row apart, would otherwise be
        gathered a byte at a time in every program's KV loop. Here the bytes are gathered once, through L1, and
        each thread stores its keys of one column as a vector."""
        em, bn = self.em, self.bn
        v_batch = shape_of(self.att.v.type)[:-2]
        first = len(self.batch) - len(v_batch)
        self.batch_index = em.emit(tt.ProgramIdOp(1))  # over v's batch: its size-1 axes (broadcast) read 0
        self.coords = self._batch_coords(self.batch_index, [first + i for i, n in enumerate(v_batch) if n > 1])
        j = em.mul_int(em.emit(tt.ProgramIdOp(0)), bn)
        keys, d_rows, ok = self._column_tile(j, em.i32(self.s_kv) if self.s_kv % bn else None)
        columns = self._read(self.att.v, None, keys, d_rows, (self.d_v, 1), ok, cast=False)
        offsets = em.binary(tt.AddOp, em.mul_int(d_rows, self.s_kv), keys)
        offsets = em.binary(tt.AddOp, em.to_shape(em.mul_int(self.batch_index, self.d_v * self.s_kv), (1, 1)), offsets)
        shape = (self.dvp, bn)
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(out, shape), em.to_shape(offsets, shape)))
        em.emit(tt.StoreOp(ptrs, columns, em.to_shape(ok, shape) if ok is not None else None))
        return cdiv(self.s_kv, bn), prod(v_batch), 1

    def _values_transposed(self) -> bool:
        """Whether v is a strided view of an array whose keys are contiguous (`vᵀ.mT`, or a transposed copy)."""
        return self.att.v_select is None and keys_contiguous(self._stored_view(self.att.v))

    def _kv_tiles(self, j: SSAValue, bound: SSAValue | None, dv_cols: SSAValue) -> list[SSAValue]:
        """The key and value blocks at `j` as stored (keys at or past `bound` read 0): what a prefetching loop
        carries into the step that uses them."""
        return [self._key_block(j, bound, cast=False), self._value_block(j, bound, dv_cols, cast=False)]

    def _read(self, value: SSAValue, select: Select | None, rows: SSAValue, cols: SSAValue, strides: tuple[int, int],
              mask: SSAValue | None, cast: bool = True) -> SSAValue:  # fmt: skip
        """A block of k or v as stored (contiguous `strides`, or its strided view; `cast=False`: in its stored
        type), or of `where(mask, a, b)`: both views loaded, the index mask chooses."""
        if select is None:
            view = self._stored_view(value)
            if view is None:
                return self.load(value, rows, cols, *strides, mask, cast=cast)
            tile = self._load_view(view, rows, cols, mask)
            return self.em.cast(tile, element_type(value.type)) if cast else tile
        assert cast, "a selected block is cast as it is loaded"
        tiles = [self._load_view(view, rows, cols, mask) for view in (select.true, select.false)]
        return self.em.select(self._mask_tile(select.mask, rows, cols), *tiles)

    def _stored_view(self, value: SSAValue) -> QView | None:
        """The strided view of the array in memory that k or v (`value`) is read through (`Stored.view`)."""
        for st, kv in ((self.att.k_stored, self.att.k), (self.att.v_stored, self.att.v)):
            if kv is value and st is not None:
                return st.view
        return None

    def _load_view(self, view: QView, rows: SSAValue, cols: SSAValue, mask: SSAValue | None) -> SSAValue:
        """`view` broadcast over a block (size-1 dims read with stride 0), as stored."""
        pad = max(0, 2 - len(view.shape))
        view = replace(view, shape=(1,) * pad + view.shape, strides=(0,) * pad + view.strides)
        row_stride, col_stride = (0 if d == 1 else st for d, st in zip(view.shape[-2:], view.strides[-2:]))
        return self.load(view.base, rows, cols, row_stride, col_stride, mask, view)
