"""Two reductions of one row that a walk over the row computes together, though one reads the other.

- Online softmax: `rsum = sum(exp(a - max(a)))` with its max: running (max, sum), the sum rescaled by
  exp(m - m') whenever the max grows.
- Centered second moment (variance, layer norm): `rsq = sum((a - mean(a))**2)` (or its mean) with the mean:
  running (count, mean, M2), each chunk's own mean and M2 merged with Chan's formula, as stable as the
  two-pass form it replaces.

Either runs in its reductions' accumulator type (`accumulator_element`: f32 for 16- and 32-bit floats, f64
for f64, as every float reduction accumulates), its constants and partials too. A pair gives the running
values of a walk (`init`, `step`), the values of its two reductions (`finish`), and for split rows the
per-slice partials (`parts`, the running values themselves) and how to combine a row's partials (`combine`).
Looped rows then read the row once for both; split rows save a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.ir import Attribute, Operation, SSAValue

from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.lowering.fusion.emitter import Emitter
from tinyton.lowering.fusion.reduction_kinds import accumulator_element

Shape = tuple[int, ...]
Owner = Callable[[SSAValue], Operation | None]


def _through_views(owner: Owner, value: SSAValue) -> Operation | None:
    op = owner(value)
    while isinstance(op, (tta.ReshapeOp, tta.BroadcastToOp)):
        op = owner(op.input)
    return op


@dataclass
class _Walked:
    """Two reductions of `a`, the second reading the first."""

    first: tta.ReduceOp
    second: tta.ReduceOp
    a: SSAValue

    @property
    def element(self) -> Attribute:
        """The type of the running values: an f64 row's stays f64 (f32 ones drift by ~1e-9 relative)."""
        return accumulator_element(element_type(self.a.type))


@dataclass
class Online(_Walked):
    """`second = sum(exp(a - bcast(first)))` with `first = max(a)`."""

    parts = (("max", float("-inf")), ("sum", 0.0))
    """Partial results of a slice and their neutral values (lanes past the slices)."""

    @staticmethod
    def find(owner: Owner, rsum: Operation) -> Online | None:
        if not isinstance(rsum, tta.ReduceSumOp) or not is_float(element_type(rsum.input.type)):
            return None
        e = owner(rsum.input)
        s = owner(e.input) if isinstance(e, tta.ExpOp) else None
        if not isinstance(s, tta.SubOp):
            return None
        m = _through_views(owner, s.rhs)
        if isinstance(m, tta.ReduceMaxOp) and m.input == s.lhs and m.axis == rsum.axis:
            return Online(m, rsum, s.lhs)
        return None

    def init(self, em: Emitter, row: Shape) -> list[SSAValue]:
        return [em.const(float("-inf"), self.element, row), em.const(0.0, self.element, row)]

    def step(self, em: Emitter, run: list[SSAValue], a: SSAValue, mask: SSAValue | None, dim: int) -> list[SSAValue]:
        m, s = run
        shape = shape_of(a.type)
        if mask is not None:
            a = em.select(mask, a, em.const(float("-inf"), self.element))
        m_new = em.binary(tt.MaximumOp, m, em.reduce("max", a, dim))
        # While the row is all -inf so far, subtract 0 instead: exp(-inf - -inf) would be NaN, and the
        # chunk adds nothing (exp(-inf) = 0) whatever the later maximum.
        m_safe = em.finite_max(m_new)
        e = em.emit(tt.ExpOp(em.binary(tt.SubOp, a, em.to_shape(m_safe, shape))))
        if mask is not None:
            e = em.select(mask, e, em.const(0.0, self.element))
        scale = em.emit(tt.ExpOp(em.binary(tt.SubOp, m, m_safe)))
        return [m_new, em.binary(tt.AddOp, em.binary(tt.MulOp, s, scale), em.reduce("sum", e, dim))]

    def finish(self, em: Emitter, run: list[SSAValue]) -> tuple[SSAValue, SSAValue]:
        m, s = run
        # NumPy's sum(exp(a - max a)) of an all -inf row is NaN (exp(-inf - -inf)); the walk kept it 0.
        nan = em.const(float("nan"), self.element)
        return m, em.select(em.cmp("eq", m, em.const(float("-inf"), self.element)), nan, s)

    def combine(self, em: Emitter, tiles: list[SSAValue]) -> list[SSAValue]:
        m, s = tiles
        top = em.reduce("max", m, 0)
        safe = em.finite_max(top)  # all -inf: every partial sum is 0
        scaled = em.binary(tt.MulOp, s, em.emit(tt.ExpOp(em.binary(tt.SubOp, m, em.to_shape(safe, shape_of(m.type))))))
        return [top, em.reduce("sum", scaled, 0)]


@dataclass
class Centered(_Walked):
    """`second = sum((a - bcast(first))**2)` (or its mean) with `first = mean(a)`, the square written `d * d`."""

    parts = (("count", 0.0), ("mean", 0.0), ("m2", 0.0))

    @staticmethod
    def find(owner: Owner, rsq: Operation) -> Centered | None:
        if not isinstance(rsq, (tta.ReduceSumOp, tta.ReduceMeanOp)) or not is_float(element_type(rsq.input.type)):
            return None
        sq = owner(rsq.input)
        d = owner(sq.lhs) if isinstance(sq, tta.MulOp) and sq.lhs == sq.rhs else None
        if not isinstance(d, tta.SubOp):
            return None
        m = _through_views(owner, d.rhs)
        if isinstance(m, tta.ReduceMeanOp) and m.input == d.lhs and m.axis == rsq.axis:
            return Centered(m, rsq, d.lhs)
        return None

    def init(self, em: Emitter, row: Shape) -> list[SSAValue]:
        return [em.const(0.0, self.element, row)] * 3

    def step(self, em: Emitter, run: list[SSAValue], a: SSAValue, mask: SSAValue | None, dim: int) -> list[SSAValue]:
        n, mean, m2 = run
        zero, one = em.const(0.0, self.element), em.const(1.0, self.element)
        if mask is None:
            count = em.to_shape(em.const(float(shape_of(a.type)[dim]), self.element), shape_of(n.type))
        else:
            a = em.select(mask, a, zero)
            count = em.reduce("sum", em.select(mask, em.to_shape(one, shape_of(a.type)), zero), dim)
        chunk_mean = em.binary(tt.DivOp, em.reduce("sum", a, dim), em.binary(tt.MaximumOp, count, one))
        d = em.binary(tt.SubOp, a, em.to_shape(chunk_mean, shape_of(a.type)))
        if mask is not None:
            d = em.select(mask, d, zero)
        chunk_m2 = em.reduce("sum", em.binary(tt.MulOp, d, d), dim)
        total = em.binary(tt.AddOp, n, count)
        weight = em.binary(tt.DivOp, count, em.binary(tt.MaximumOp, total, one))
        delta = em.binary(tt.SubOp, chunk_mean, mean)
        new_mean = em.binary(tt.AddOp, mean, em.binary(tt.MulOp, delta, weight))
        spread = _spread(em, delta, em.binary(tt.MulOp, n, weight))
        return [total, new_mean, em.binary(tt.AddOp, em.binary(tt.AddOp, m2, chunk_m2), spread)]

    def finish(self, em: Emitter, run: list[SSAValue]) -> tuple[SSAValue, SSAValue]:
        return run[1], run[2]

    def combine(self, em: Emitter, tiles: list[SSAValue]) -> list[SSAValue]:
        n, mean, m2 = tiles
        total = em.reduce("sum", n, 0)
        row_mean = em.binary(tt.DivOp, em.reduce("sum", em.binary(tt.MulOp, n, mean), 0), total)
        d = em.binary(tt.SubOp, mean, em.to_shape(row_mean, shape_of(mean.type)))
        spread = em.reduce("sum", _spread(em, d, n), 0)
        return [total, row_mean, em.binary(tt.AddOp, em.reduce("sum", m2, 0), spread)]


def _spread(em: Emitter, delta: SSAValue, weight: SSAValue) -> SSAValue:
    """Chan's `delta**2 * weight`, 0 where the weight is (a side with no elements yet: the first chunk, lanes
    past the slices): `delta**2` overflows f32 for means past 1.8e19, and `inf * 0` is NaN where NumPy's
    variance is inf."""
    zero = em.const(0.0, element_type(weight.type))
    return em.select(em.cmp("gt", weight, zero), em.binary(tt.MulOp, em.binary(tt.MulOp, delta, delta), weight), zero)


Pair = Online | Centered


def find_pair(owner: Owner, second: Operation) -> Pair | None:
    """The pair `second` closes, if any (its first reduction must be walked in the same pass)."""
    return Online.find(owner, second) or Centered.find(owner, second)

