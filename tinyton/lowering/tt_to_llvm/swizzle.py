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
    def chunks(self) -> int:
        return max(1, self.cols // self.vec)

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
        chunk = ctx.int_op("xor", ctx.int_op("lshr", col, shift), phase)
        inner = ctx.int_op("and", col, ctx.const(self.vec - 1))
        line = ctx.int_op("mul", row, ctx.const(self.cols))
        return ctx.int_op("add", line, ctx.int_op("or", ctx.int_op("shl", chunk, shift), inner))


def store_swizzled(
    ctx: KernelContext, regs: Sequence[SSAValue], layout: Layout, elem: Attribute, swizzle: Swizzle, byte_offset: int
) -> None:
    """Store a 2-D tile held in `layout`: each run of consecutive registers within one chunk
    as one vector store (built explicitly: LLVM does not always merge scalar stores whose
    addresses it hoisted out of a loop one by one)."""
    run = min(layout.contiguous_per_thread(), swizzle.vec)
    for r in range(0, len(regs), run):
        row, col = ctx.coords(layout, r)
        ptr = ctx.smem_ptr(elem, swizzle.offset(ctx, row, col), byte_offset)
        value = regs[r]
        if run > 1:
            value = ctx.value(llvm.UndefOp(VectorType(elem, [run])))
            for i, reg in enumerate(regs[r : r + run]):
                value = ctx.value(llvm.InsertElementOp(value, reg, ctx.const(i)))
        ctx.insert(llvm.StoreOp(value, ptr, alignment=run * byte_size(elem)))
