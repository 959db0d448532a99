"""The bounds check of an index a kernel reads with (a gather's, a put's, `tta.check_index`'s): NumPy's IndexError
as a `tt.assert`, so that an index out of range stops the kernel instead of reading or writing another element."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import Signedness, i1, i32
from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.emitter import Emitter


def checked_index(em: Emitter, idx: SSAValue, n: int, axis: int,
                  lanes: Callable[[tuple[int, ...]], SSAValue | None]) -> tuple[SSAValue, SSAValue]:
    """`idx` (any int type) into an axis of `n`: (the i32 index in `[0, n)`, negative ones counted from the end; the
    i1 `inside`). One outside `[-n, n)` stops the kernel (`tt.assert`) unless its lane (`lanes(shape)`: the domain's
    mask, None for all) is off. The check is in the index's own type (int64, uint64, ...); only then is it narrowed
    to i32, exactly: 2**32 + 1 is out of range, not 1."""
    index = element_type(idx.type)
    if index.bitwidth < 32:  # widens exactly (an i8 cannot hold the bounds)
        idx, index = em.cast(idx, i32), i32
    inside = em.cmp("lt", idx, em.const(n, index))
    if index.signedness.data != Signedness.UNSIGNED:
        inside = em.and_(em.cmp("ge", idx, em.const(-n, index)), inside)
    on = lanes(shape_of(inside.type))
    checked = inside if on is None else em.binary(tt.OrOp, inside, em.binary(tt.XorOp, on, em.const(1, i1)))
    em.emit(tt.AssertOp(checked, f"index out of bounds for axis {axis} with size {n} (IndexError in NumPy)"))
    idx = em.cast(idx, i32)
    return em.select(em.cmp("lt", idx, em.i32(0)), em.binary(tt.AddOp, idx, em.i32(n)), idx), inside
