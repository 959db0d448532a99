"""RoPE's rotated halves of a projection with few rows, from the projection's own tile.

`tinyton-push-slices` makes the halves of `concatenate([-x[..., h:], x[..., :h]], -1)`, `x = a @ w` a product of
a decode step (rewrites/remap.py: `_push_into_product`), products of their own: the same left operand and a
window of `w` shifted by `h` columns (half the head dimension D, the product's column extent), bounded to the
half it fills. Computed as dots, each reads `w` again and holds an accumulator: three dots where one does.

When a program's output tile holds both columns of each rotated pair (`c` and `c + h`), a window's tile is the
product's tile with its two halves swapped: one `tt.gather` after the K loop, no dot. The plan pairs the N
source for that (`Source.pair`): a program's BN lanes are two runs of BN/2 columns `h` apart, `[c, c + BN/2)`
and `[c + h, c + h + BN/2)` (one run when BN is D). Lane `j` and lane `(j + BN/2) % BN` are then a rotated pair.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import OpResult, SSAValue

from tinyton.analysis.domain import Domain
from tinyton.analysis.views import View
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import shape_of
from tinyton.lowering.fusion.emitter import Emitter


def products(dom: Domain) -> list[tta.MatmulOp]:
    """The region's matmuls, the domain's own first."""
    found = [v.op for v in dom.maps if isinstance(v, OpResult) and isinstance(v.op, tta.MatmulOp)]
    return list(dict.fromkeys([dom.matmul, *found] if dom.matmul is not None else found))


def rotated_windows(dom: Domain, ops: Iterable[tta.MatmulOp]) -> dict[tta.MatmulOp, tta.MatmulOp]:
    """Each product of `ops` that is a rotated half of another one of `ops` (same left operand), with that
    other: its right operand is the other's, shifted by `+h` columns and read in `[0, h)`, or by `-h` and read
    in `[h, D)`."""
    ops = list(ops)
    views = {op: dom.view(op.rhs) for op in ops}
    found: dict[tta.MatmulOp, tta.MatmulOp] = {}
    for main in ops:
        whole = views[main]
        if whole.bounds is not None or len(whole.shape) < 2 or whole.shape[-1] % 2:
            continue
        for op in ops:
            if op is not main and op not in found and op.lhs is main.lhs and _rotates(whole, views[op]):
                found[op] = main
    return found


def _rotates(whole: View, window: View) -> bool:
    """`window` reads `whole`'s other half of each column pair: shifted by +-h columns, bounded to its half."""
    if (window.base, window.shape, window.strides) != (whole.base, whole.shape, whole.strides) or not window.bounds:
        return False
    d = whole.shape[-1]
    h, step = d // 2, whole.strides[-1]
    if not step or any(b != (0, n) for b, n in zip(window.bounds[:-1], whole.shape[:-1])):
        return False
    shift = window.offset - whole.offset
    return (window.bounds[-1], shift) in (((0, h), h * step), ((h, d), -h * step))


def rotation_half(dom: Domain) -> int:
    """`h`, half the column extent, when some product of the region is a rotated half of another; else 0."""
    return dom.shape[-1] // 2 if rotated_windows(dom, products(dom)) else 0


def pairable(half: int, block_n: int) -> bool:
    """Whether BN columns can hold whole rotated pairs `half` apart: two runs of BN/2 that tile each half."""
    return half > 0 and block_n >= 2 and half % (block_n // 2) == 0


def swapped_halves(em: Emitter, tile: SSAValue) -> SSAValue:
    """A paired `[BM, BN]` tile with its lanes `j` and `(j + BN/2) % BN` exchanged."""
    bm, bn = shape_of(tile.type)
    index = em.mod_int(em.add(em.arange(bn, 2, 1), em.i32(bn // 2)), bn)
    return em.emit(tt.GatherOp(tile, em.to_shape(index, (bm, bn)), 1))
