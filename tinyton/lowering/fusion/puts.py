"""The store of a `tta.put` (`x[key] = v`): its values written into their window of the destination's buffer.

The put's result shares that buffer (tinyton/rewrites/in_place.py, `build_program`), so the kernel stores
only the assigned elements: per dim `start + i * step`, along the index array's axis `index[i]` (negative
counts from the end; an index outside `[-n, n)` stops the kernel, as NumPy's IndexError, and is never
written).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from tinyton.analysis.views import contiguous_strides
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import shape_of
from tinyton.lowering.fusion.emitter import broadcast_shape
from tinyton.lowering.fusion.index_check import checked_index


def store_put(rg, put: tta.PutOp, ptr: SSAValue, scope) -> None:
    """Emit the store of `put`'s values (a register value of `rg`, a RegionEmitter) through `ptr`."""
    em = rg.em
    m = rg.dom.map_of(put.result)
    values = rg.operand_value(put.result, m, scope)
    dest = shape_of(put.result.type)
    strides_of, axis = contiguous_strides(dest), put.index_axis
    strides = {a: strides_of[d] * put.steps[d] for d, a in enumerate(m) if a is not None and d != axis}
    offset = sum(put.starts[d] * strides_of[d] for d in range(len(dest)) if d != axis)
    extra, inside = em.i32(offset) if offset else None, None
    if axis is not None:
        idx, inside = checked_index(em, rg.operand(put, 2, scope), dest[axis], axis,
                                    lambda shape: rg.mask(shape, scope))
        extra = em.add(extra, em.mul_int(idx, strides_of[axis]))
    p, shape = rg.pointers(ptr, strides, scope, extra)
    shape = broadcast_shape(shape, shape_of(values.type))
    if shape and shape_of(p.type) != shape:
        p = em.to_shape(p, shape)
    mask = rg.mask(shape, scope)
    if inside is not None:
        mask = em.to_shape(em.and_(mask, inside), shape) if shape else em.and_(mask, inside)
    em.emit(tt.StoreOp(p, em.to_shape(values, shape), mask))
