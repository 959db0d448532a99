"""The score steps of a flash-attention program: what runs on each `[BM, BN]` block of `q @ kᵀ` before the
online softmax (tinyton/analysis/attention.py finds them: scales, additive biases, `where` masks).

Index masks (causal, sliding windows, key limits) are computed from the block's row and column indices; bias
and mask arrays are loaded through their broadcast strides; constants are splatted. One multiplication or
division by a single value takes log2(e) in with it (`_log2e_step`), so the softmax's exp2 needs no multiply
of its own and a division by `sqrt(d)` costs what `* scale` costs.
"""

from __future__ import annotations

from collections.abc import Callable
from math import copysign, isfinite, prod

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, i1, i32
from xdsl.ir import SSAValue

from tinyton.analysis.attention import Attention, ScoreStep
from tinyton.analysis.index_bias import from_indices, index_bias
from tinyton.analysis.index_masks import Affine, Logic, Mask, index_mask, is_constant, is_minus_inf
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.attention_bias import BiasTiles
from tinyton.lowering.fusion.emitter import Emitter, f32

LOG2E = 1.4426950408889634

_STEP_OPS: dict[type, type] = {
    tta.AddOp: tt.AddOp,
    tta.SubOp: tt.SubOp,
    tta.MulOp: tt.MulOp,
    tta.DivOp: tt.DivOp,
    tta.MaximumOp: tt.MaximumOp,
    tta.MinimumOp: tt.MinimumOp,
}


RUNTIME_ZERO = 2.0**-149
"""What a runtime scale of zero is in the softmax's FMA (`ScoreSteps._runtime_factor`): the least f32 subnormal, whose
product with any finite score is below 5e-7, so each exp2 is within that of NumPy's exp(0), and with -inf is -inf."""


def _constant_factor(step: ScoreStep) -> float:
    """A constant scale step's factor times log2(e); a division by zero NumPy's +-inf (or NaN, of a zero score)
    once multiplied."""
    number = float(step.others[0].op.value.value.data)
    if isinstance(step.op, tta.DivOp):
        return LOG2E / number if number else copysign(float("inf"), number)
    return number * LOG2E


def score_arrays(att: Attention) -> list[SSAValue]:
    """The arrays the score steps read block by block (not constants, one-element scales or index masks)."""
    return [v for step in att.steps for v in step.others
            if not is_constant(v) and not from_indices(v) and prod(shape_of(v.type)) > 1]


class ScoreSteps:
    """The score-step half of an attention program (`attention._Program`), which provides the emitter, the
    region, the kernel's pointers, the block sizes and the loads."""

    em: Emitter
    att: Attention
    scalars: dict[SSAValue, SSAValue]
    """The one-element integer inputs of the index masks, read before the KV loops (`_read_scalars`)."""
    score_tiles: dict[SSAValue, SSAValue]
    """The current key block's tiles of score arrays read ahead of the steps (`FlashAttention3Forms._score_tiles`)."""
    pointers: dict[SSAValue, SSAValue]
    bm: int
    bn: int
    score_shape: tuple[int, int]
    """The score block's shape: `(BM, BN)`, or `(BN, BM)` for the dk/dv kernel's transposed scores (rows keys,
    columns queries): the row and column index tiles passed in are then `[1, BM]` queries and `[BN, 1]` keys."""
    scale: SSAValue | None
    runtime_factor: SSAValue | None
    """A runtime scale as the softmax's FMA takes it (`_runtime_factor`), read before the KV loops."""
    masked_score: SSAValue | None
    """What a masked score is before a runtime scale multiplies it (`_masked_score`), chosen before the KV loops."""
    load: Callable[..., SSAValue]
    _matrix_strides: Callable[[SSAValue], tuple[int, int]]

    def _affine_value(self, affine: Affine) -> SSAValue:
        """An index expression's constant and one-element-input part (i32), the inputs read by `_read_scalars`
        (before the KV loops) or here."""
        em = self.em
        value: SSAValue = em.i32(affine.const)
        for scalar, coef in affine.scalars:
            read = self.scalars.get(scalar) or em.cast(em.emit(tt.LoadOp(self.pointers[scalar], None, None)), i32)
            value = em.add(value, em.mul_int(read, coef))
        return value

    def _read_scalars(self) -> None:
        """Read the one-element integer inputs of the index masks (a decode step's position) once, before the KV
        loops, for every block to use: read in the loop, each block's mask waited on its own load of it."""
        masks = [m for step in self.att.steps for v in step.others if (m := index_mask(v)) is not None]
        masks += [select.mask for select in (self.att.k_select, self.att.v_select) if select is not None]
        affines = [self.att.key_limit] if self.att.key_limit is not None else []
        while masks:
            mask = masks.pop()
            if isinstance(mask, Logic):
                masks += mask.parts
            else:
                affines.append(mask.lhs)
        for scalar in dict.fromkeys(scalar for affine in affines for scalar, _ in affine.scalars):
            self.scalars[scalar] = self.em.cast(self.em.emit(tt.LoadOp(self.pointers[scalar], None, None)), i32)

    def _mask_tile(self, mask: Mask, rows: SSAValue, cols: SSAValue) -> SSAValue:
        """An index mask (tinyton/analysis/attention.py) on this block: a `[BM, BN]` (or broadcastable) i1 tile."""
        em = self.em
        if isinstance(mask, Logic):
            a, b = (self._mask_tile(part, rows, cols) for part in mask.parts)
            return em.binary(tt.AndOp if mask.kind == "and" else tt.OrOp, a, b)
        return em.cmp(mask.predicate, self._affine_tile(mask.lhs, rows, cols), em.i32(0))

    def _affine_tile(self, affine: Affine, rows: SSAValue, cols: SSAValue) -> SSAValue:
        """An affine index expression on this block (i32): `[rows, 1]`, `[1, cols]` or both, as its indices vary."""
        em = self.em
        value = self._affine_value(affine)
        for position, coef in affine.coef:
            value = em.binary(tt.AddOp, value, em.mul_int(rows if position == -2 else cols, coef))
        return value

    def _read_leaf(self, value: SSAValue) -> SSAValue:
        """A value constant along the block (an index bias's slope) at the program's batch entry, as a `[1, 1]`
        tile of its type."""
        origin = self.em.const(0, i32, (1, 1))
        return self.load(value, origin, origin, 0, 0, None)

    def _score_block(self, s: SSAValue, rows: SSAValue, cols: SSAValue, row_ok: SSAValue, col_ok: SSAValue | None,
                     masked: bool) -> SSAValue:
        """The score steps on a `[BM, BN]` block of `q @ kᵀ` (the causal mask and the bounds of S_kv only when
        `masked`), in log2 units (log2(e) folded into a scale), or, where the scale is left to the softmax's FMA
        (`_deferred_scale`), in units of that scale; keys past S_kv are -inf."""
        em = self.em
        folded, deferred = self._log2e_step(), self._deferred_scale()
        minus_inf = None  # after the folded step, what a mask's -inf is before the deferred scale
        for step in self.att.steps:
            if step is folded:
                if deferred is None:
                    s = em.binary(tt.MulOp, s, self._folded_scale(step))
                else:
                    minus_inf = self._masked_score()
            elif masked or not self._is_causal_step(step):
                s = self._apply(step, s, rows, cols, em.and_(row_ok, col_ok), minus_inf)
        if folded is None and deferred is None:
            s = em.binary(tt.MulOp, s, em.const(LOG2E, f32))
        if col_ok is not None:
            past = self._masked_score() if deferred is not None else em.const(float("-inf"), f32)
            s = em.select(em.to_shape(col_ok, self.score_shape), s, past)
        return s

    def _is_causal_step(self, step: ScoreStep) -> bool:
        """The `where` that applies the causal mask (the unmasked loop only visits blocks it keeps whole)."""
        return step is self.att.causal_step

    def _log2e_step(self) -> ScoreStep | None:
        """The multiplication or division of the scores by one value (a constant, or a one-element array
        such as a runtime scale) that log2(e) folds into (the exp2 of the softmax then needs no extra
        multiply, and a division becomes a multiplication): the last such step, followed only by `where`
        masks whose other value is a constant (-inf stays -inf)."""
        for step in reversed(self.att.steps):
            op = step.op
            if isinstance(op, (tta.MulOp, tta.DivOp)) and all(prod(shape_of(v.type)) == 1 for v in step.others):
                return step if isinstance(op, tta.MulOp) or step.operand == 0 else None
            masked_value = op.operands[3 - step.operand] if isinstance(op, tta.WhereOp) and step.operand else None
            if masked_value is None or not is_minus_inf(masked_value):
                return None
        return None

    def _deferred_scale(self) -> float | SSAValue | None:
        """The scale the score steps leave to the softmax, which applies it in one FMA an element, `exp2(s * c - m)`
        (FlashAttention's `softmax_scale_log2`), instead of a multiply here and a subtraction there: the folded
        step's factor times log2(e) (log2(e) alone without one). The maxima are then taken of the unscaled scores,
        or their minima under a negative factor (`row_maxima`), and a mask after the scale puts what becomes -inf
        once scaled (`_masked_score`: +inf under a negative factor). A nonzero finite constant, or a runtime value
        (`_runtime_factor`) when the scale is the first score step (a -inf or a bias before a runtime zero scale
        is NaN in NumPy). None otherwise: the scale multiplied here."""
        step = self._log2e_step()
        if step is None:
            return LOG2E
        (value,) = step.others
        if not is_constant(value):
            return self._runtime_factor(step) if step is self.att.steps[0] else None
        factor = _constant_factor(step)
        return factor if factor and isfinite(factor) else None

    def _runtime_factor(self, step: ScoreStep) -> SSAValue:
        """A runtime scale as the softmax's FMA takes it: zero becomes the least subnormal (`RUNTIME_ZERO`), so that
        the masks' -inf stays -inf once scaled (NumPy's scores are then 0 or -inf: each p within 5e-7 of 1 or 0),
        read once before the KV loops (`prepare_scale`)."""
        if self.runtime_factor is None:
            em, c = self.em, self._folded_scale(step)
            zero = em.cmp("eq", c, em.const(0.0, f32))
            self.runtime_factor = em.select(zero, em.const(RUNTIME_ZERO, f32), c)
        return self.runtime_factor

    def _masked_score(self) -> SSAValue:
        """A masked score before the deferred scale multiplies it: -inf, or +inf under a negative one (a runtime
        one's sign chosen once, before the KV loops)."""
        em, c = self.em, self._deferred_scale()
        if not isinstance(c, SSAValue):
            return em.const(float("-inf") if c is None or c > 0 else float("inf"), f32)
        if self.masked_score is None:
            positive = em.cmp("ge", c, em.const(0.0, f32))
            self.masked_score = em.select(positive, em.const(float("-inf"), f32), em.const(float("inf"), f32))
        return self.masked_score

    def prepare_scale(self) -> None:
        """Before the KV loops: a runtime scale read once (`_folded_scale`), as the FMA takes it and what its masked
        scores are."""
        folded = self._log2e_step()
        if folded is not None and not is_constant(folded.others[0]):
            self._folded_scale(folded)
            if isinstance(self._deferred_scale(), SSAValue):
                self._masked_score()

    def row_maxima(self, s: SSAValue, positive: bool = True) -> SSAValue:
        """Each row's maximum of a score block in log2 units: of the unscaled scores times a deferred scale, their
        minima under a negative one (a runtime scale's sign: `positive`, which the caller branches on)."""
        em, c = self.em, self._deferred_scale()
        if c is None:
            return em.reduce("max", s, 1)
        if isinstance(c, SSAValue):
            return em.binary(tt.MulOp, em.reduce("max" if positive else "min", s, 1), c)
        return em.binary(tt.MulOp, em.reduce("max" if c > 0 else "min", s, 1), em.const(c, f32))

    def _scaled_exp2(self, s: SSAValue, offset: SSAValue) -> SSAValue:
        """`exp2(s - offset)` of scores in log2 units, or `exp2(s * c - offset)` of scores awaiting their scale `c`
        (`_deferred_scale`) as one FMA an element; `offset` (`[BM, 1]` or `[1, BM]`) broadcast along the keys."""
        em, c = self.em, self._deferred_scale()
        shape = shape_of(s.type)
        if c is None:
            return em.emit(tt.Exp2Op(em.binary(tt.SubOp, s, em.to_shape(offset, shape))))
        factor = em.to_shape(c, shape) if isinstance(c, SSAValue) else em.const(c, f32, shape)
        negated = em.to_shape(em.emit(tt.NegOp(offset)), shape)
        return em.emit(tt.Exp2Op(em.emit(tt.FmaOp(s, factor, negated))))

    def _folded_scale(self, step: ScoreStep) -> SSAValue:
        """The factor of the folded step times log2(e), in f32: a constant, or for a one-element array its
        value read once (before the KV loop) and multiplied (divided into log2(e), for a divisor) there."""
        em, (value,) = self.em, step.others
        divides = isinstance(step.op, tta.DivOp)
        if is_constant(value):
            return em.const(_constant_factor(step), f32)
        if self.scale is None:
            read = em.cast(em.emit(tt.LoadOp(self.pointers[value], None, None)), f32)
            log2e = em.const(LOG2E, f32)
            self.scale = em.binary(tt.DivOp, log2e, read) if divides else em.binary(tt.MulOp, read, log2e)
        return self.scale

    def _apply(self, step: ScoreStep, s: SSAValue, rows: SSAValue, cols: SSAValue, mask: SSAValue | None,
               minus_inf: SSAValue | None = None) -> SSAValue:
        """One score step on the `[BM, BN]` block, its other operands loaded (where `mask`), computed from
        the block's indices, or splatted; a constant -inf is `minus_inf` where given (`_masked_score`)."""
        em = self.em
        operands = []
        for i, value in enumerate(step.op.operands):
            if i == step.operand:
                operands.append(s)
            elif (index := index_mask(value)) is not None:
                operands.append(self._mask_tile(index, rows, cols))
            elif index_bias(value):
                operands.append(BiasTiles(em, self._affine_tile, self._read_leaf).tile(value, rows, cols))
            elif minus_inf is not None and is_minus_inf(value):
                operands.append(minus_inf)
            elif is_constant(value):
                attr = value.op.value
                element = i1 if element_type(value.type) == i1 else f32
                number = attr.value.data if isinstance(attr, (FloatAttr, IntegerAttr)) else 0
                operands.append(em.const(number, element))
            else:
                tile = self.score_tiles.get(value)
                if tile is None:
                    row_stride, col_stride = self._matrix_strides(value)
                    tile = self.load(value, rows, cols, row_stride, col_stride, mask)
                operands.append(tile if element_type(value.type) == i1 else em.cast(tile, f32))
        op = step.op
        if isinstance(op, tta.WhereOp):
            cond, yes, no = operands
            return em.select(em.to_shape(cond, self.score_shape), yes, no)
        if isinstance(op, tta.NegOp):
            return em.emit(tt.NegOp(s))
        return em.binary(_STEP_OPS[type(op)], *operands)
