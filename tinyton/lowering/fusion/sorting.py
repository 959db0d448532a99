"""Rows sorted in registers (`tta.sort`, `tta.argsort`): Triton's bitonic network, the one `tl.sort` builds
(tinyton/frontend/sort_ops.py), on (value, index) pairs and in NumPy's order.

A tile of 2**L lanes is viewed as a hypercube `[2] * L` (a reshape); cube dimension `j` is bit `L - 1 - j` of a
lane's row-major index, and the row is its last `log2(BLOCK)` bits. A compare-and-swap step pairs every lane with
its partner across one cube dimension, `x ^ xor_sum(x, dim)` (a reduction over two elements: registers, or one
shuffle on the GPU), and keeps the pair that comes first or last in the order, by its side and the direction of
its run; merge stage `s` swaps across bits `s - 1 ... 0`, its runs alternating with bit `s` until the last one.

The order: (a, i) comes after (b, j) when a's value does (NumPy's: NaN after every number; descending, torch's:
the reverse, NaN first), or when the values are equal (NaN equal to NaN, -0.0 to 0.0) and i > j. The indices
differ, so the order is strict and total and the network gives NumPy's stable sort whatever the lanes hold. The
lanes past a row of n hold the order's last value (NaN, -inf, or the int type's largest or smallest) with indices
n and up: they sort after the whole row.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import IntegerType, i1
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.lowering.fusion.emitter import Emitter, identity


def _last_value(element: Attribute, descending: bool) -> float | int:
    """The value that comes last in the order of `element`: NaN (ascending floats), else the smallest or largest."""
    if is_float(element) and not descending:
        return float("nan")
    return identity("max" if descending else "min", element)


def _bits(em: Emitter, x: SSAValue) -> SSAValue:
    """`x` as an integer tile of its width (xor-able)."""
    element = element_type(x.type)
    return em.emit(tt.BitcastOp(x, IntegerType(element.bitwidth))) if is_float(element) else x


def _partner(em: Emitter, x: SSAValue, axis: int) -> SSAValue:
    """Each lane's partner across the size-2 cube dimension `axis`: the pair's xor, xor-ed with the lane."""
    bits = _bits(em, x)
    (pair,) = em.combine_reduce([bits], axis, lambda lhs, rhs: [em.binary(tt.XorOp, lhs[0], rhs[0])])
    if len(shape_of(bits.type)) > 1:
        pair = em.expand(pair, axis)
    other = em.binary(tt.XorOp, bits, pair)
    return other if other.type == x.type else em.emit(tt.BitcastOp(other, element_type(x.type)))


def _not(em: Emitter, x: SSAValue) -> SSAValue:
    return em.binary(tt.XorOp, x, em.const(1, i1))


def _after(em: Emitter, lane: list[SSAValue], other: list[SSAValue], descending: bool) -> SSAValue:
    """Whether the (value, index) pair `lane` comes after `other` in the order."""
    (a, i), (b, j) = lane, other
    first, second = (b, a) if descending else (a, b)
    later, same = em.cmp("gt", first, second), em.cmp("eq", a, b)
    if is_float(element_type(a.type)):  # NaN after every number (before, descending), equal to NaN
        a_nan, b_nan = em.cmp("ne", a, a), em.cmp("ne", b, b)
        first_nan, second_nan = (b_nan, a_nan) if descending else (a_nan, b_nan)
        later = em.binary(tt.OrOp, later, em.binary(tt.AndOp, first_nan, _not(em, second_nan)))
        same = em.binary(tt.OrOp, same, em.binary(tt.AndOp, a_nan, b_nan))
    return em.binary(tt.OrOp, later, em.binary(tt.AndOp, same, em.cmp("gt", i, j)))


class _Cube:
    """The (value, index) pairs of a tile as a hypercube, and the compare-and-swap steps on it."""

    def __init__(self, em: Emitter, values: SSAValue, index: SSAValue, descending: bool):
        self.em, self.descending = em, descending
        self.shape = shape_of(values.type)
        self.dims = prod(self.shape).bit_length() - 1
        self.pairs = [em.emit(tt.ReshapeOp(v, [2] * self.dims)) for v in (values, index)]
        self.bits: dict[int, SSAValue] = {}

    def bit(self, j: int) -> SSAValue:
        """True where a lane's index has bit `j` set, shaped to broadcast against the cube (emitted once)."""
        if j not in self.bits:
            em = self.em
            ones = em.cmp("ne", em.emit(tt.ArangeOp(0, 2)), em.i32(0))
            shape = [1] * (self.dims - j - 1) + [2] + [1] * j
            self.bits[j] = ones if len(shape) == 1 else em.emit(tt.ReshapeOp(ones, shape))
        return self.bits[j]

    def compare_and_swap(self, j: int, flip: SSAValue | None) -> None:
        """Each lane takes its partner across bit `j` where the pair is out of order: the lane of the lower index
        keeps the pair that comes first, unless `flip` (a descending run of a merge)."""
        em = self.em
        others = [_partner(em, v, self.dims - 1 - j) for v in self.pairs]
        keeps_last = self.bit(j) if flip is None else em.binary(tt.XorOp, self.bit(j), flip)
        swap = em.binary(tt.XorOp, _after(em, self.pairs, others, self.descending), keeps_last)
        self.pairs = [em.select(swap, o, v) for v, o in zip(self.pairs, others)]

    def unfold(self) -> tuple[SSAValue, SSAValue]:
        values, index = (self.em.emit(tt.ReshapeOp(v, self.shape)) for v in self.pairs)
        return values, index


def sort_rows(em: Emitter, values: SSAValue, index: SSAValue, mask: SSAValue | None,
              descending: bool) -> tuple[SSAValue, SSAValue]:
    """The rows (the last dim) of tile `values` sorted, and the `index` (i32, the lanes' positions in the row) of
    each sorted element; `mask` (None: every lane) marks the lanes inside the row."""
    if mask is not None:
        element = element_type(values.type)
        values = em.select(mask, values, em.const(_last_value(element, descending), element))
    row_bits = shape_of(values.type)[-1].bit_length() - 1
    cube = _Cube(em, values, index, descending)
    for stage in range(1, row_bits + 1):
        flip = cube.bit(stage) if stage < row_bits else None
        for j in reversed(range(stage)):
            cube.compare_and_swap(j, flip)
    return cube.unfold()
