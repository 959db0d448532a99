"""`tt.reduce` and `tt.scan`: the combine region run on whole NumPy slices at once.

A reduction combines the two halves of the (power-of-two) axis until one element is left, a butterfly
tree like the GPU's; a scan is Hillis-Steele: at step `d` every element combines with the one `d`
earlier, `log2(n)` region runs in all (the GPU runs the same steps on its registers). Values may carry a
leading program dimension, so the axis is addressed from the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)

from tinyton.dialects import tt

from .state import SimFunctions
from .values import rank, scalar


def _combine(interpreter: Interpreter, op: tt.CombineReduceOp | tt.ScanOp, lhs: list[Any], rhs: list[Any]) -> list[Any]:
    return list(interpreter.run_ssacfg_region(op.combine, (*lhs, *rhs), op.name))


def _along_last(values: PythonValues, axis: int) -> list[np.ndarray]:
    """The inputs, broadcast to one shape, with `axis` (counted from the end) moved last."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in values))
    return [np.moveaxis(np.broadcast_to(v, shape), axis, -1) for v in values]


@register_impls
class CombineFunctions(SimFunctions):
    """Reductions and scans with a combine region."""

    @impl(tt.CombineReduceOp)
    def run_reduce(self, interpreter: Interpreter, op: tt.CombineReduceOp, args: PythonValues) -> PythonValues:
        acc = _along_last(args, op.axis.value.data - rank(op.inputs[0].type))
        while acc[0].shape[-1] > 1:
            half = acc[0].shape[-1] // 2
            acc = _combine(interpreter, op, [a[..., :half] for a in acc], [a[..., half:] for a in acc])
        return tuple(scalar(np.asarray(a)[..., 0]) for a in acc)

    @impl(tt.ScanOp)
    def run_scan(self, interpreter: Interpreter, op: tt.ScanOp, args: PythonValues) -> PythonValues:
        axis = op.axis.value.data - rank(op.inputs[0].type)
        acc = _along_last(args, axis)
        if op.reverse.value:
            acc = [a[..., ::-1] for a in acc]
        n, d = acc[0].shape[-1], 1
        while d < n:
            later = _combine(interpreter, op, [a[..., :-d] for a in acc], [a[..., d:] for a in acc])
            acc = [
                np.concatenate([a[..., :d], np.broadcast_to(b, a[..., d:].shape)], axis=-1) for a, b in zip(acc, later)
            ]
            d *= 2
        if op.reverse.value:
            acc = [a[..., ::-1] for a in acc]
        return tuple(np.moveaxis(a, -1, axis) for a in acc)

    @impl_terminator(tt.CombineYieldOp)
    def run_combine_yield(
        self, interpreter: Interpreter, op: tt.CombineYieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()
