"""
How a tile is spread over the registers, lanes and warps of a program.

A `Layout` is linear over bits, like Triton's linear layouts: bit `i` of the register
index, of the lane id and of the warp id each contribute a fixed coordinate vector (a
*basis*), and the coordinate an element sits at is the sum of the bases of the set bits.
Every basis is zero (the threads differing in that bit hold replicas) or a power of two
along exactly one dimension, and the non-zero bases of a dimension are distinct, so sums
never carry and a coordinate is `const(register) + lanes(lane) + warps(warp)`.

With this form, everything that the lowering needs to know about two layouts is found
generically, by comparing bases: whether a value can change layout (or broadcast) by
reusing registers, which lanes a reduction must shuffle over, which threads are replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

Basis = tuple[int, ...]

LANES = 32
LANE_BITS = 5


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _unit(rank: int, dim: int, value: int) -> Basis:
    return tuple(value if d == dim else 0 for d in range(rank))


def _drop(basis: Basis, dim: int) -> Basis:
    return basis[:dim] + basis[dim + 1 :]


@dataclass(frozen=True)
class Layout:
    """A distributed layout of a tile of `shape` (bases are per register/lane/warp bit)."""

    shape: tuple[int, ...]
    reg: tuple[Basis, ...]
    lane: tuple[Basis, ...]
    warp: tuple[Basis, ...]
    parent: Layout | None = field(default=None, compare=False, repr=False)
    """The layout this one was sliced from, kept through `expand` of the same axis: the
    layout a broadcast back to the parent's shape can use without moving data."""
    sliced_axis: int | None = field(default=None, compare=False, repr=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    def reg_coord(self, r: int) -> Basis:
        """Coordinate of register `r` in the thread with lane 0 of warp 0."""
        coord = [0] * self.rank
        for bit, basis in enumerate(self.reg):
            if r >> bit & 1:
                coord = [c + b for c, b in zip(coord, basis)]
        return tuple(coord)

    def contiguous_per_thread(self) -> int:
        """How many consecutive registers hold consecutive elements of the last dimension."""
        n = 1
        for basis in self.reg:
            if self.rank == 0 or basis != _unit(self.rank, self.rank - 1, n):
                break
            n *= 2
        return n

    def slice(self, axis: int) -> Layout:
        """Layout of the reduction along `axis`: registers along it merge, lanes along it replicate."""
        reg = tuple(d for b in self.reg if any(d := _drop(b, axis)))
        return Layout(
            _drop(self.shape, axis),
            reg,
            tuple(_drop(b, axis) for b in self.lane),
            tuple(_drop(b, axis) for b in self.warp),
            parent=self,
            sliced_axis=axis,
        )

    def slice_reg_index(self, r: int, axis: int) -> int:
        """Register of `self.slice(axis)` that register `r` reduces into."""
        out, bit = 0, 0
        for i, basis in enumerate(self.reg):
            if not basis[axis]:
                out |= (r >> i & 1) << bit
                bit += 1
        return out

    def expand(self, axis: int) -> Layout:
        """Layout with a size-1 dimension inserted at `axis` (same registers)."""

        def ins(b: Basis) -> Basis:
            return b[:axis] + (0,) + b[axis:]

        keep = self.parent if self.sliced_axis == axis else None
        return Layout(
            self.shape[:axis] + (1,) + self.shape[axis:],
            tuple(ins(b) for b in self.reg),
            tuple(ins(b) for b in self.lane),
            tuple(ins(b) for b in self.warp),
            parent=keep,
            sliced_axis=axis if keep is not None else None,
        )

    def project(self, shape: Sequence[int]) -> Layout:
        """The layout of a tile of `shape` (this one's, with some dimensions 1) that
        broadcasts to this layout by reusing registers (its `broadcast_target`)."""

        def proj(b: Basis) -> Basis:
            return tuple(0 if s == 1 else x for x, s in zip(b, shape))

        return Layout(
            tuple(shape),
            tuple(p for b in self.reg if any(p := proj(b))),
            tuple(proj(b) for b in self.lane),
            tuple(proj(b) for b in self.warp),
            parent=self,
        )

    def broadcast_target(self, shape: Sequence[int]) -> Layout | None:
        """The parent layout when broadcasting to its shape is pure register reuse."""
        if self.parent is not None and self.parent.shape == tuple(shape):
            return self.parent
        return None

    def permute(self, order: Sequence[int]) -> Layout:
        """The layout of the transposed tile: dimension `i` is this one's dimension `order[i]`."""

        def perm(b: Basis) -> Basis:
            return tuple(b[d] for d in order)

        return Layout(
            tuple(self.shape[d] for d in order),
            tuple(perm(b) for b in self.reg),
            tuple(perm(b) for b in self.lane),
            tuple(perm(b) for b in self.warp),
        )

    def reshape(self, shape: Sequence[int]) -> Layout:
        """The same registers as a tile of `shape` holding the elements in the same row-major order (`tt.reshape`):
        each basis's row-major offset read back in the new shape. Every size being a power of two, that offset,
        a power of two, is one dimension's power of two there too."""
        shape = tuple(shape)
        assert prod(shape) == prod(self.shape) and not any(d & (d - 1) for d in (*shape, *self.shape)), shape
        old, new = self.strides(), tuple(prod(shape[d + 1 :]) for d in range(len(shape)))

        def move(b: Basis) -> Basis:
            offset = sum(x * s for x, s in zip(b, old))
            return tuple(offset // s % n for s, n in zip(new, shape))

        return Layout(shape, tuple(map(move, self.reg)), tuple(map(move, self.lane)), tuple(map(move, self.warp)))

    def with_pair_dim(self) -> Layout:
        """This layout with a new last dimension of 2 held in register bit 0 (`tt.join`'s result)."""
        rank = self.rank + 1
        return Layout(
            (*self.shape, 2),
            (_unit(rank, rank - 1, 1), *((*b, 0) for b in self.reg)),
            tuple((*b, 0) for b in self.lane),
            tuple((*b, 0) for b in self.warp),
        )

    def has_pair_dim(self) -> bool:
        """Whether the last dimension has size 2 and is register bit 0 (as `with_pair_dim` makes it)."""
        return self.shape[-1:] == (2,) and self.reg[:1] == (_unit(self.rank, self.rank - 1, 1),)

    def without_pair_dim(self) -> Layout:
        """The inverse of `with_pair_dim`: the layout of each half of a `tt.split`."""
        assert self.has_pair_dim()
        return Layout(
            self.shape[:-1],
            tuple(b[:-1] for b in self.reg[1:]),
            tuple(b[:-1] for b in self.lane),
            tuple(b[:-1] for b in self.warp),
        )

    def strides(self) -> tuple[int, ...]:
        """Row-major strides of the shape, for linearised (shared-memory) addressing."""
        return tuple(prod(self.shape[d + 1 :]) for d in range(self.rank))


def replica_mask(bases: Sequence[Basis]) -> int:
    """Mask of the lane (or warp) id bits whose threads hold the same elements."""
    return sum(1 << i for i, b in enumerate(bases) if not any(b))


def bits_along(bases: Sequence[Basis], axis: int) -> list[int]:
    """Lane (or warp) id bits that move along `axis`."""
    return [i for i, b in enumerate(bases) if b[axis]]


def blocked(shape: Sequence[int], num_warps: int, vec: int = 4) -> Layout:
    """
    The default layout of a tile: up to `vec` contiguous elements of the last dimension per
    thread (128-bit accesses), lanes side by side along the last dimension (coalescing),
    warps along the first dimension (so row reductions stay inside a warp), then
    repetitions; threads beyond the tile's size hold replicas.
    """
    shape = tuple(shape)
    rank = len(shape)
    threads = LANES * num_warps
    covered = [1] * rank

    def next_basis(order: Sequence[int]) -> Basis:
        for d in order:
            if covered[d] < shape[d]:
                basis = _unit(rank, d, covered[d])
                covered[d] *= 2
                return basis
        return (0,) * rank

    reg: list[Basis] = []
    per_thread = min(vec, shape[-1], max(1, prod(shape) // threads))
    while covered[-1] < per_thread:
        reg.append(next_basis([rank - 1]))
    inner_first = list(reversed(range(rank)))
    lane = [next_basis(inner_first) for _ in range(LANE_BITS)]
    warp = [next_basis(range(rank)) for _ in range(_log2(num_warps))]
    while any(c < s for c, s in zip(covered, shape)):
        reg.append(next_basis(inner_first))
    return Layout(shape, tuple(reg), tuple(lane), tuple(warp))


def scannable(layout: Layout, axis: int) -> bool:
    """Whether, by increasing position along `axis`, the layout's bits along it are registers, then
    lanes, then warps, then registers again (runs, lanes, warps, chunks): the order a scan walks
    (tinyton/lowering/tt_to_llvm/scan.py). `blocked` layouts always are."""
    bits = sorted(
        (b[axis], kind)
        for kind, bases in ((0, layout.reg), (1, layout.lane), (2, layout.warp))
        for b in bases
        if b[axis]
    )
    kinds = [kind for _, kind in bits]
    threads = [i for i, kind in enumerate(kinds) if kind]
    if not threads:
        return True
    inner = kinds[threads[0] : threads[-1] + 1]
    return 0 not in inner and inner == sorted(inner)


def register_map(src: Layout, dst: Layout) -> list[int] | None:
    """
    For each register of `dst`, the register of `src` (in the same thread) holding the
    same element, or None when the data must move between threads. `src` may have size 1
    where `dst` does not (a broadcast). Registers are compile-time indices, so a mapping
    exists exactly when the lanes and warps carry the same coordinates in both layouts.
    """

    def proj(b: Basis) -> Basis:
        return tuple(0 if s == 1 else x for x, s in zip(b, src.shape))

    if [proj(b) for b in dst.lane] != list(src.lane) or [proj(b) for b in dst.warp] != list(src.warp):
        return None
    where = {src.reg_coord(r): r for r in range(src.num_regs)}
    mapping = [where.get(proj(dst.reg_coord(r))) for r in range(dst.num_regs)]
    return None if None in mapping else mapping  # type: ignore[return-value]
