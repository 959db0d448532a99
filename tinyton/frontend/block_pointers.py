"""Block pointers (`tl.make_block_ptr`, `tl.advance`) and tensor descriptors (`tl.make_tensor_descriptor`),
as a mixin of `TileBuilder`.

Neither is an IR type: a `BlockPointer` is a compile-time record of a scalar base pointer and per-dimension
runtime sizes, strides and offsets (i32 scalars), and a load or store through it becomes a tile of pointers
`base + sum_d (offset_d + arange(block_d)) * stride_d` with the mask `0 <= index_d < size_d` on the
dimensions of `boundary_check` (Triton's RewriteTensorPointer, done while generating code), so it runs
everywhere, the simulator included. Loops carry a block pointer as its scalars (`tiles`/`with_tiles`).
A `TensorDescriptor` is a block pointer at offset 0 whose `load(offsets)`/`store(offsets, value)` check
every dimension, as TMA does (out-of-range elements read its padding, 0 or NaN). One made on the host
(`tinyton.tools.tensor_descriptor`) arrives as the kernel parameters of a `DescriptorArg`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from xdsl.dialects.builtin import i32
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import KERNEL_BUILDERS, Tile, check_block_shape, describe, is_number

PADDING = {"": 0, "zero": 0, "nan": float("nan")}


@dataclass(frozen=True)
class BlockPointer:
    """A block of `block_shape` elements at `offsets` in a `shape`/`strides` array at `base`."""

    base: Tile
    shape: tuple[Tile | int, ...]
    strides: tuple[Tile | int, ...]
    offsets: tuple[Tile | int, ...]
    block_shape: tuple[int, ...]
    order: tuple[int, ...]

    def tiles(self) -> list[Tile | int]:
        """The values, in a fixed order (what a loop carries)."""
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def with_tiles(self, tiles: list[Tile]) -> BlockPointer:
        rank = len(self.block_shape)
        return replace(
            self, base=tiles[0], shape=tuple(tiles[1 : 1 + rank]), strides=tuple(tiles[1 + rank : 1 + 2 * rank]),
            offsets=tuple(tiles[1 + 2 * rank :]),
        )


@dataclass(frozen=True)
class TensorDescriptor:
    """`tl.make_tensor_descriptor` (`tl.tensor_descriptor`): blocks of `block_shape` read and written at any
    offsets."""

    block: BlockPointer
    padding: str = "zero"

    @property
    def block_shape(self) -> tuple[int, ...]:
        return self.block.block_shape

    def load(self, offsets: Any) -> Tile:
        """The block at `offsets`; elements outside the tensor read 0."""
        return KERNEL_BUILDERS[-1].descriptor_load(self, offsets)

    def store(self, offsets: Any, value: Any) -> None:
        """Write the block at `offsets`; elements outside the tensor are not written."""
        b = KERNEL_BUILDERS[-1]
        b.store_block(b.advance(self.block, offsets), value, tuple(range(len(self.block_shape))))

    def tiles(self) -> list[Tile | int]:
        return self.block.tiles()

    def with_tiles(self, tiles: list[Tile]) -> TensorDescriptor:
        return TensorDescriptor(self.block.with_tiles(tiles), self.padding)


@dataclass(frozen=True)
class DescriptorArg:
    """The kernel parameters of a host `TensorDescriptor`: a `pointer`, then as many sizes and as many
    strides (i32) as `block_shape` has dimensions, each parameter specialised as `specs` says
    (tinyton/frontend/specialisation.py); the block shape and padding are compiled in."""

    pointer: Attribute
    block_shape: tuple[int, ...]
    padding: str
    specs: tuple[str, ...]

    def parameter_types(self) -> list[Attribute]:
        return [self.pointer, *[i32] * (2 * len(self.block_shape))]

    def bind(self, args: list[Tile]) -> TensorDescriptor:
        """The kernel's descriptor over its parameters `args` (of `parameter_types`)."""
        rank = len(self.block_shape)
        shape, strides = tuple(args[1 : 1 + rank]), tuple(args[1 + rank :])
        order = tuple(range(rank))[::-1]
        return TensorDescriptor(BlockPointer(args[0], shape, strides, (0,) * rank, self.block_shape, order), self.padding)


TensorDescriptor.load.__tt_builtin__ = "descriptor.load"  # type: ignore[attr-defined] - callable in kernels
TensorDescriptor.store.__tt_builtin__ = "descriptor.store"  # type: ignore[attr-defined]
AGGREGATES = (BlockPointer, TensorDescriptor)
"""Kernel values made of several tiles (a loop carries each of them)."""


def is_aggregate(x: Any) -> bool:
    return isinstance(x, AGGREGATES)


class BlockPointerOps:
    """Block-pointer builtins of `TileBuilder`, whose `binary`, `cast`, `broadcast`, `emit` and memory ops
    they use."""

    def make_block_ptr(
        self, base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any
    ) -> BlockPointer:
        if not (isinstance(base, Tile) and base.is_pointer and not base.shape):
            raise CompilationError(f"tl.make_block_ptr needs a scalar pointer as its base, got {describe(base)}")
        block = check_block_shape(tuple(block_shape), "tl.make_block_ptr block_shape")
        rank = len(block)
        lists = {"shape": shape, "strides": strides, "offsets": offsets, "order": order}
        for name, value in lists.items():
            if not isinstance(value, (tuple, list)) or len(value) != rank:
                raise CompilationError(
                    f"tl.make_block_ptr: {name} must have one entry per dimension of block_shape {list(block)}, "
                    f"got {describe(value)}"
                )
        if sorted(order) != list(range(rank)):
            raise CompilationError(f"tl.make_block_ptr: order must be a permutation of 0..{rank - 1}, got {order}")
        sizes, steps, starts = ([self._index(v, f"tl.make_block_ptr {n}") for v in lists[n]] for n in lists if n != "order")
        return BlockPointer(base, tuple(sizes), tuple(steps), tuple(starts), block, tuple(order))

    def advance(self, ptr: Any, offsets: Any) -> BlockPointer:
        ptr = self._block_pointer(ptr, "tl.advance")
        if not isinstance(offsets, (tuple, list)) or len(offsets) != len(ptr.block_shape):
            raise CompilationError(f"tl.advance needs one offset per dimension of the block, got {describe(offsets)}")
        moved = [self.binary("+", o, self._index(d, "tl.advance offset")) for o, d in zip(ptr.offsets, offsets)]
        return replace(ptr, offsets=tuple(moved))

    def make_tensor_descriptor(
        self, base: Any, shape: Any, strides: Any, block_shape: Any, padding_option: Any = "zero"
    ) -> TensorDescriptor:
        rank = len(block_shape) if isinstance(block_shape, (tuple, list)) else 0
        last = strides[-1] if isinstance(strides, (tuple, list)) and strides else None
        if is_number(last) and last != 1:
            raise CompilationError(f"tl.make_tensor_descriptor: the last dimension must be contiguous (stride 1), got {last}")
        if padding_option not in ("zero", "nan"):
            raise CompilationError(f"padding_option must be 'zero' or 'nan', got {describe(padding_option)}")
        block = self.make_block_ptr(base, shape, strides, [0] * rank, block_shape, list(range(rank))[::-1])
        return TensorDescriptor(block, padding_option)

    def descriptor_load(self, desc: TensorDescriptor, offsets: Any) -> Tile:
        """The masked load of the block at `offsets`, as a `tt.descriptor_load` that also names the block by
        the descriptor's scalars (what TMA reads on sm_90)."""
        ptr = self.advance(desc.block, offsets)
        load = self.load_block(ptr, tuple(range(len(ptr.block_shape))), desc.padding).value.owner
        assert isinstance(load, tt.LoadOp)
        shape, strides, starts = ([self._scalar(v) for v in vs] for vs in (ptr.shape, ptr.strides, ptr.offsets))
        tile = self.emit(tt.DescriptorLoadOp(
            load.ptr, load.mask, load.other, ptr.base.value, shape, strides, starts, desc.padding or "zero"
        ))
        load.detach()
        load.erase()
        return tile

    def _scalar(self, value: Tile | int) -> SSAValue:
        """An i32 scalar value of an index (a Python int becomes a constant)."""
        return value.value if isinstance(value, Tile) else self.constant(value, i32).value

    def load_block(self, ptr: BlockPointer, boundary_check: Any, padding_option: Any) -> Tile:
        if padding_option not in PADDING:
            raise CompilationError(f"padding_option must be 'zero' or 'nan', got {describe(padding_option)}")
        pointers, mask = self._block_addresses(ptr, boundary_check)
        if mask is None:
            return self.load(pointers, None, None)
        return self.load(pointers, mask, PADDING[padding_option])

    def store_block(self, ptr: BlockPointer, value: Any, boundary_check: Any) -> None:
        pointers, mask = self._block_addresses(ptr, boundary_check)
        if isinstance(value, Tile) and value.shape != ptr.block_shape:
            value = self.broadcast(value, ptr.block_shape)
        self.store(pointers, value, mask)

    def _block_addresses(self, ptr: BlockPointer, boundary_check: Any) -> tuple[Tile, Tile | None]:
        """The block's pointer tile and its mask (None without boundary checks)."""
        rank = len(ptr.block_shape)
        checks = (boundary_check,) if isinstance(boundary_check, int) else tuple(boundary_check or ())
        if any(not isinstance(d, int) or not 0 <= d < rank for d in checks):
            raise CompilationError(f"boundary_check must list dimensions of the block (0..{rank - 1}), got {boundary_check}")
        pointers: Any = ptr.base
        mask: Any = None
        for d, size in enumerate(ptr.block_shape):
            index = self.binary("+", self.arange(0, size), ptr.offsets[d])
            index = self.subscript(index, (None,) * d + (slice(None),) + (None,) * (rank - 1 - d))
            pointers = self.binary("+", pointers, self.binary("*", index, ptr.strides[d]))
            if d in checks:
                inside = self.binary("&", self.binary(">=", index, 0), self.binary("<", index, ptr.shape[d]))
                mask = inside if mask is None else self.binary("&", mask, inside)
        return self.broadcast(pointers, ptr.block_shape), None if mask is None else self.broadcast(mask, ptr.block_shape)

    def _index(self, value: Any, what: str) -> Tile | int:
        """An int scalar: a Python int stays one (folds), a tile becomes i32."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, Tile) and not value.shape and tt.is_int(value.type):
            return self.cast(value, i32)
        raise CompilationError(f"{what} must be an int scalar, got {describe(value)}")

    @staticmethod
    def _block_pointer(ptr: Any, what: str) -> BlockPointer:
        if not isinstance(ptr, BlockPointer):
            raise CompilationError(f"{what} needs a block pointer (tl.make_block_ptr), got {describe(ptr)}")
        return ptr
