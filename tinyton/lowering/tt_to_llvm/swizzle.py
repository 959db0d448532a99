"""
Tiles in shared memory with XOR-swizzled 16-byte chunks, for `ldmatrix`.

A row-major tile whose rows are 128 bytes (or a multiple) puts the same chunk of eight
consecutive rows in the same four banks: `ldmatrix`, which reads one 16-byte chunk from
each of eight rows per 8x8 matrix, would serialize eight ways. Like Triton's swizzled
shared encoding, chunk `c` of row `r` is stored at chunk `c ^ phase(r)`, where the phase
changes every `per_phase` rows (the rows that share one 128-byte line) and takes
`max_phase` values: then any eight consecutive rows' chunk `c` fall in distinct banks, and
so do the 16-byte stores of eight threads writing one 128-byte line. Elements inside a
chunk keep their order, so stores of runs of up to a chunk stay vectorised.

Rows longer than 128 bytes are cut into *panels* 128 bytes wide, each a contiguous `rows` x 128-byte
tile: the canonical layout of wgmma's 128-byte swizzle (Triton's NVMMA shared layout), where a matrix
descriptor steps from one panel to the next by a fixed stride. Rows of 128 bytes or less are one panel
whose phases are exactly wgmma's 128/64/32-byte swizzles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import llvm
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Attribute, SSAValue

from tinyton.lowering.tt_to_llvm.context import KernelContext
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.shared import byte_size

CHUNK_BYTES = 16
LINE_BYTES = 128
"""Bytes the 32 banks serve at once."""


def _log2(n: int) -> int:
    return n.bit_length() - 1


@dataclass(frozen=True)
class Swizzle:
    """A `rows` x `cols` row-major tile of `elem_bytes`-byte elements, chunks swizzled."""

    rows: int
    cols: int
    elem_bytes: int

    @property
    def vec(self) -> int:
        """Elements per chunk."""
        return CHUNK_BYTES // self.elem_bytes

    @property
    def panel_cols(self) -> int:
        """Columns of one panel (at most 128 bytes of a row)."""
        return min(self.cols, LINE_BYTES // self.elem_bytes)

    @property
    def panel_bytes(self) -> int:
        return self.rows * self.panel_cols * self.elem_bytes

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of a panel: the swizzle's width (128, 64 or 32 for wgmma)."""
        return self.panel_cols * self.elem_bytes

    @property
    def chunks(self) -> int:
        """Chunks in one row of a panel."""
        return max(1, self.panel_cols // self.vec)

    @property
    def per_phase(self) -> int:
        return max(1, LINE_BYTES // CHUNK_BYTES // self.chunks)

    @property
    def max_phase(self) -> int:
        return min(LINE_BYTES // CHUNK_BYTES, self.chunks & -self.chunks)

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.elem_bytes

    def offset(self, ctx: KernelContext, row: SSAValue, col: SSAValue) -> SSAValue:
        """Element offset of (`row`, `col`) from the tile's start."""
        phase = ctx.int_op(
            "and", ctx.int_op("lshr", row, ctx.const(_log2(self.per_phase))), ctx.const(self.max_phase - 1)
        )
        shift = ctx.const(_log2(self.vec))
        in_panel = ctx.int_op("and", col, ctx.const(self.panel_cols - 1))
        chunk = ctx.int_op("xor", ctx.int_op("lshr", in_panel, shift), phase)
        inner = ctx.int_op("and", col, ctx.const(self.vec - 1))
        line = ctx.int_op("mul", row, ctx.const(self.panel_cols))
        if self.panel_cols < self.cols:
            panel = ctx.int_op("lshr", col, ctx.const(_log2(self.panel_cols)))
            line = ctx.int_op("add", line, ctx.int_op("mul", panel, ctx.const(self.rows * self.panel_cols)))
        return ctx.int_op("add", line, ctx.int_op("or", ctx.int_op("shl", chunk, shift), inner))


def store_swizzled(
    ctx: KernelContext, regs: Sequence[SSAValue], layout: Layout, elem: Attribute, swizzle: Swizzle, byte_offset: int
) -> None:
    """Store a 2-D tile held in `layout`: each run of consecutive registers within one chunk
    as one vector store (built explicitly: LLVM does not always merge scalar stores whose
    addresses it hoisted out of a loop one by one). The addresses are computed here
    (`KernelContext.pinned_coords`), not hoisted out of the loop the store is in."""
    run = min(layout.contiguous_per_thread(), swizzle.vec)
    base = ctx.pinned_coords(layout)
    for r in range(0, len(regs), run):
        row, col = ctx.coords(layout, r, base)
        ptr = ctx.smem_ptr(elem, swizzle.offset(ctx, row, col), byte_offset)
        value = regs[r]
        if run > 1:
            value = ctx.value(llvm.UndefOp(VectorType(elem, [run])))
            for i, reg in enumerate(regs[r : r + run]):
                value = ctx.value(llvm.InsertElementOp(value, reg, ctx.const(i)))
        ctx.insert(llvm.StoreOp(value, ptr, alignment=run * byte_size(elem)))
