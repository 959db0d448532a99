"""Shape ops (`tt.trans`, `tt.reshape`, `tt.join`, `tt.split`, `tt.hint`) on NumPy values.

Tile dimensions are addressed from the end, since a value may carry a leading program dimension.
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from tinyton.dialects import tt

from .errors import SimulatorError
from .state import SimFunctions
from .values import Pointer, map_offsets, rank


@register_impls
class ShapeFunctions(SimFunctions):
    """Transpose, reshape, join, split and hints."""

    @impl(tt.TransOp)
    def run_trans(self, interpreter: Interpreter, op: tt.TransOp, args: PythonValues) -> PythonValues:
        r = rank(op.input.type)
        order = [d - r for d in op.order.get_values()]

        def permute(x: np.ndarray) -> np.ndarray:
            lead = np.ndim(x) - r
            return np.transpose(x, [*range(lead), *(lead + r + d for d in order)])

        return (map_offsets(args[0], permute),)

    @impl(tt.ReshapeOp)
    def run_reshape(self, interpreter: Interpreter, op: tt.ReshapeOp, args: PythonValues) -> PythonValues:
        r, shape = rank(op.input.type), tt.shape_of(op.result.type)
        return (map_offsets(args[0], lambda x: np.reshape(x, np.shape(x)[: np.ndim(x) - r] + shape)),)

    @impl(tt.JoinOp)
    def run_join(self, interpreter: Interpreter, op: tt.JoinOp, args: PythonValues) -> PythonValues:
        a, b = args
        if isinstance(a, Pointer) or isinstance(b, Pointer):
            if not (isinstance(a, Pointer) and isinstance(b, Pointer)) or a.buffer != b.buffer:
                raise SimulatorError("the simulator joins pointers into one argument only")
            return (a.moved(_stack(a.offsets, b.offsets)),)
        return (_stack(a, b),)

    @impl(tt.SplitOp)
    def run_split(self, interpreter: Interpreter, op: tt.SplitOp, args: PythonValues) -> PythonValues:
        x = args[0]
        return map_offsets(x, lambda v: v[..., 0]), map_offsets(x, lambda v: v[..., 1])

    @impl(tt.HintOp)
    def run_hint(self, interpreter: Interpreter, op: tt.HintOp, args: PythonValues) -> PythonValues:
        return (args[0],)


def _stack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    return np.stack([np.broadcast_to(a, shape), np.broadcast_to(b, shape)], axis=-1)
