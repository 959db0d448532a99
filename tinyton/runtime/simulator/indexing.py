"""`tt.gather`, `tt.histogram` and `tt.inline_asm` on NumPy values.

A gather index outside the source axis is an error naming the program and the lane (the GPU reads the
index modulo the axis size, Triton's is undefined). A histogram counts each value `v` with `0 <= v < bins`
(and a true mask) once, as Triton's GPU lowering does. Inline PTX is refused: the simulator runs tt ops,
not PTX.
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Operation

from tinyton.dialects import tt

from .errors import SimulatorError
from .state import SimFunctions
from .values import rank


def _lead(value: np.ndarray, r: int) -> tuple[int, ...]:
    """The leading program dimension of a value of tile rank `r` (empty for one program)."""
    return np.shape(value)[: np.ndim(value) - r]


@register_impls
class IndexingFunctions(SimFunctions):
    """Gathers, histograms and the refusal of inline asm."""

    @impl(tt.GatherOp)
    def run_gather(self, interpreter: Interpreter, op: tt.GatherOp, args: PythonValues) -> PythonValues:
        src, index = (np.asarray(a) for a in args)
        r = rank(op.src.type)
        axis, size = op.axis.value.data - r, tt.shape_of(op.src.type)[op.axis.value.data]
        index = index.astype(np.int64)
        launch = self.launch(interpreter)
        bad = launch.restrict((index < 0) | (index >= size), r)
        if np.any(bad):
            program, lane = launch.locate(bad, r)
            value = int(index[np.unravel_index(int(np.argmax(np.broadcast_to(bad, index.shape))), index.shape)])
            raise SimulatorError(
                f"tt.gather index {value} out of range [0, {size}) in program {program} at lane {lane}; "
                f"Triton leaves it undefined, tinyton's GPU code reads index mod {size}\n    {self.op_text(op)}"
            )
        lead = np.broadcast_shapes(_lead(src, r), _lead(index, r))
        src = np.broadcast_to(src, lead + tt.shape_of(op.src.type))
        index = np.broadcast_to(np.clip(index, 0, size - 1), lead + tt.shape_of(op.index.type))
        return (np.take_along_axis(src, index, axis=axis),)

    @impl(tt.HistogramOp)
    def run_histogram(self, interpreter: Interpreter, op: tt.HistogramOp, args: PythonValues) -> PythonValues:
        r, bins = rank(op.src.type), tt.shape_of(op.result.type)[0]
        values = np.asarray(args[0]).astype(np.int64)
        mask = np.asarray(args[1]) if op.mask is not None else np.ones((), bool)
        lead = np.broadcast_shapes(_lead(values, r), _lead(mask, r))
        programs = int(np.prod(lead))
        values = np.broadcast_to(values, lead + tt.shape_of(op.src.type)).reshape(programs, -1)
        counted = np.broadcast_to(mask, lead + tt.shape_of(op.src.type)).reshape(programs, -1)
        counted = counted & (values >= 0) & (values < bins)
        slots = np.where(counted, values + bins * np.arange(programs)[:, None], programs * bins)
        counts = np.bincount(slots.ravel(), minlength=programs * bins + 1)[:-1]
        return (counts.reshape(lead + (bins,)).astype(np.int32),)


def refuse_inline_asm(kernel: Operation) -> None:
    """Raise before running anything when the kernel holds inline PTX, naming the user's line."""
    for op in kernel.walk():
        if isinstance(op, tt.InlineAsmOp):
            where = f" at {op.source.data}" if op.source is not None else ""
            raise SimulatorError(
                f"the simulator cannot run inline PTX (tl.inline_asm_elementwise{where}: {op.asm.data!r}); "
                "run the kernel on a GPU (TINYTON_BACKEND=cuda)"
            )
