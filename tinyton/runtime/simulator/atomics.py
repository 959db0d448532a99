"""`tt.atomic_rmw`, `tt.atomic_cas`, `tt.descriptor_reduce`, `tt.debug_barrier` and the grid-dependency wait in the simulator.

Atomics run sequentially: programs in order (the batched path flattens its lanes program-major), the lanes of
a tile in row-major order, each reading the element, combining and writing it back before the next lane, so
the old values returned are those of one valid serialisation of the GPU's atomics. A scalar atomic runs once
per program. Float max/min use the GPU lowering's integer trick (a non-negative value takes a signed integer
max of the bits, a negative one an unsigned min), so the results agree bit for bit, signed zeros and NaNs
included. Masked-off lanes touch nothing and give 0. The barrier has nothing to order one program at a time.
A grid barrier needs every program of the launch in one batch (the driver runs such a kernel so): each op
then runs for all programs before the next, so the writes before the barrier precede the reads after it; the
counter's bit 31 flips, as on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from tinyton.dialects import tt

from .errors import SimulatorError
from .memory import MemoryFunctions
from .state import Launch, SimFunctions
from .values import Pointer, rank

Combine = Callable[..., np.ndarray]


def _bits(x: np.ndarray, signed: bool) -> np.ndarray:
    return x.view(f"{'i' if signed else 'u'}{x.dtype.itemsize}")


def _float_extreme(take_max: bool) -> Combine:
    """max/min of floats as the GPU computes them: through integer atomics on the bits."""

    def combine(old: np.ndarray, val: np.ndarray) -> np.ndarray:
        non_negative = _bits(val, True) >= 0
        signed = (np.maximum if take_max else np.minimum)(_bits(old, True), _bits(val, True))
        unsigned = (np.minimum if take_max else np.maximum)(_bits(old, False), _bits(val, False))
        return np.where(non_negative, signed, unsigned.view(signed.dtype)).view(old.dtype)

    return combine


INT_RMW: dict[str, Combine] = {
    "add": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "xchg": lambda old, val: val,
}
FLOAT_RMW: dict[str, Combine] = {
    "add": np.add,
    "max": _float_extreme(True),
    "min": _float_extreme(False),
    "xchg": lambda old, val: val,
}


def _cas(old: np.ndarray, cmp: np.ndarray, val: np.ndarray) -> np.ndarray:
    """Store `val` where the old value has `cmp`'s bits (floats compare as bits, as `atom.cas.b32`)."""
    equal = _bits(old, True) == _bits(cmp, True) if old.dtype.kind == "f" else old == cmp
    return np.where(equal, val, old)


def apply_sequentially(buffer: np.ndarray, index: np.ndarray, operands: list[np.ndarray], combine: Combine) -> np.ndarray:
    """For each lane in order: `old = buffer[i]; buffer[i] = combine(old, *operands)`; the old values."""
    if np.unique(index).size == index.size:
        old = buffer[index].copy()
        buffer[index] = combine(old, *operands)
        return old
    old = np.empty(index.shape, buffer.dtype)
    for lane, i in enumerate(index):
        old[lane] = buffer[i]
        buffer[i] = combine(buffer[i : i + 1], *(o[lane : lane + 1] for o in operands))[0]
    return old


@register_impls
class AtomicFunctions(SimFunctions):
    """Sequential atomics on the argument arrays."""

    @impl(tt.AtomicRMWOp)
    def run_atomic_rmw(self, interpreter: Interpreter, op: tt.AtomicRMWOp, args: PythonValues) -> PythonValues:
        ptr, val = args[0], args[1]
        mask = args[2] if op.mask is not None else None
        table = FLOAT_RMW if tt.is_float(op.val.type) else INT_RMW
        return (self._run(interpreter, op, ptr, [val], mask, table[op.kind.data]),)

    @impl(tt.DescriptorReduceOp)
    def run_descriptor_reduce(self, interpreter: Interpreter, op: tt.DescriptorReduceOp,
                              args: PythonValues) -> PythonValues:
        """The atomic adds it stands for, lane by lane (`np.add.at`: no old values to give back)."""
        buffer, shape, active, index = self._lanes(interpreter, op, args[0], args[2] if op.mask is not None else None)
        np.add.at(buffer, index, np.broadcast_to(np.asarray(args[1], buffer.dtype), shape)[active])
        return ()

    @impl(tt.AtomicCASOp)
    def run_atomic_cas(self, interpreter: Interpreter, op: tt.AtomicCASOp, args: PythonValues) -> PythonValues:
        ptr, cmp, val = args
        return (self._run(interpreter, op, ptr, [cmp, val], None, _cas),)

    @impl(tt.DebugBarrierOp)
    def run_debug_barrier(self, interpreter: Interpreter, op: tt.DebugBarrierOp, args: PythonValues) -> PythonValues:
        return ()

    @impl(tt.GridDependencyWaitOp)
    def run_grid_dependency_wait(self, interpreter: Interpreter, op: tt.GridDependencyWaitOp,
                                 args: PythonValues) -> PythonValues:
        """The simulator runs one launch after the other: the one before has always completed."""
        return ()

    @impl(tt.LaunchDependentsOp)
    def run_launch_dependents(self, interpreter: Interpreter, op: tt.LaunchDependentsOp,
                              args: PythonValues) -> PythonValues:
        """The next launch starts after this one completes anyway."""
        return ()

    @impl(tt.GridBarrierOp)
    def run_grid_barrier(self, interpreter: Interpreter, op: tt.GridBarrierOp, args: PythonValues) -> PythonValues:
        """Check the groups (per counter: `programs` programs, one leader); flip each counter's bit 31."""
        launch: Launch = self.launch(interpreter)
        everyone = int(np.prod(launch.grid)) == (1 if launch.programs is None else len(launch.programs))
        if not everyone or launch.active is not None:
            raise SimulatorError(f"{op.name} needs every program of the launch running at once (in one batch)")
        ptr: Pointer = args[0]
        count = int(np.prod(launch.grid))
        offsets = np.broadcast_to(np.asarray(ptr.offsets), (count,))
        leaders = np.broadcast_to(np.asarray(args[1], bool), (count,))
        MemoryFunctions._check(self, launch, op, "atomic", ptr.buffer, offsets, None, 0)
        counters, arrivals = np.unique(offsets, return_counts=True)
        leads = np.bincount(np.searchsorted(counters, offsets[leaders]), minlength=counters.size)
        programs = op.programs.value.data
        if (arrivals != programs).any() or (leads != 1).any():
            raise SimulatorError(f"{op.name}: each counter needs {programs} programs, one of them the leader; got "
                                 f"{arrivals.tolist()} programs and {leads.tolist()} leaders")
        memory = launch.buffers[ptr.buffer].view(np.uint32)
        memory[counters] ^= np.uint32(1 << 31)
        return ()

    def _run(
        self,
        interpreter: Interpreter,
        op: tt.AtomicRMWOp | tt.AtomicCASOp,
        ptr: Pointer,
        operands: list[Any],
        mask: Any,
        combine: Combine,
    ) -> Any:
        """Apply `combine` to each active lane's element and operands, lane by lane."""
        buffer, shape, active, index = self._lanes(interpreter, op, ptr, mask)
        lanes = [np.broadcast_to(np.asarray(o, buffer.dtype), shape)[active] for o in operands]
        result = np.zeros(shape, buffer.dtype)
        result[active] = apply_sequentially(buffer, index, lanes, combine)
        return result[()] if result.ndim == 0 else result

    def _lanes(
        self, interpreter: Interpreter, op: tt.AtomicRMWOp | tt.AtomicCASOp | tt.DescriptorReduceOp, ptr: Pointer,
        mask: Any,
    ) -> tuple[np.ndarray, tuple[int, ...], np.ndarray, np.ndarray]:
        """The array an atomic op writes through `ptr` (refused when read-only), the shape of its lanes, which of
        them are active and the element each active one writes (checked to lie in the array)."""
        launch: Launch = self.launch(interpreter)
        r = rank(op.ptr.type)
        buffer = launch.buffers[ptr.buffer]
        if not buffer.flags.writeable:
            number, name = launch.buffer_args[ptr.buffer]
            raise SimulatorError(f"{op.name} on argument '{name}' (#{number}), a read-only array")
        mask = launch.restrict(mask, r)
        # Every program of a batch runs the atomic, even where its operands are the same for all of them.
        lead = () if launch.programs is None else (len(launch.programs),)
        shape = lead + tt.shape_of(op.ptr.type)
        offsets = np.broadcast_to(ptr.offsets, shape)
        active = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
        index = offsets[active]
        MemoryFunctions._check(self, launch, op, "atomic", ptr.buffer, index, (offsets, active), r)
        return buffer, shape, active, index
