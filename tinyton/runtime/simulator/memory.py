"""Pointer arithmetic, loads and stores: gathers and scatters into the argument arrays.

A lane whose mask is false is never read or written, and its address is never used as an index; a lane
whose mask is true must address an element of its argument array, else `OutOfBoundsError`. With a program
dimension (the batched path) offsets are flattened program-major, so a scatter applies the stores of the
batch in program order (a later program wins where two write one element, as when they run one by one).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from tinyton.dialects import tt

from .errors import OutOfBoundsError, SimulatorError
from .state import Launch, SimFunctions
from .values import Pointer, rank


def scatter(buffer: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """`buffer[index] = values` where the last of several writes to one element wins (NumPy leaves it open)."""
    if index.size <= 1 or bool(np.all(index[1:] > index[:-1])):
        buffer[index] = values
        return
    lo, hi = int(index.min()), int(index.max())
    if hi - lo < 4 * index.size and int(np.bincount(index - lo).max()) <= 1:
        buffer[index] = values
        return
    order = np.argsort(index, kind="stable")
    ordered = index[order]
    last = np.empty(ordered.size, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    last[-1] = True
    buffer[ordered[last]] = values[order[last]]


@register_impls
class MemoryFunctions(SimFunctions):
    """`tt.addptr`, `tt.load`, `tt.store`."""

    @impl(tt.AddPtrOp)
    def run_addptr(self, interpreter: Interpreter, op: tt.AddPtrOp, args: PythonValues) -> PythonValues:
        ptr, offset = args
        return (ptr.moved(np.add(ptr.offsets, offset, dtype=np.int64)),)

    @impl(tt.LoadOp)
    def run_load(self, interpreter: Interpreter, op: tt.LoadOp, args: PythonValues) -> PythonValues:
        mask = args[1] if op.mask is not None else None
        return self._load(interpreter, op, args[0], mask, args[-1] if op.other is not None else None)

    @impl(tt.DescriptorLoadOp)
    def run_descriptor_load(
        self, interpreter: Interpreter, op: tt.DescriptorLoadOp, args: PythonValues
    ) -> PythonValues:
        """The masked load it stands for (its descriptor operands only matter to TMA)."""
        mask = args[1] if op.mask is not None else None
        other = args[1 + (op.mask is not None)] if op.other is not None else None
        return self._load(interpreter, op, args[0], mask, other)

    def _load(
        self, interpreter: Interpreter, op: tt.LoadOp | tt.DescriptorLoadOp, ptr: Pointer, mask: Any, other: Any
    ) -> PythonValues:
        launch = self.launch(interpreter)
        r = rank(op.ptr.type)
        mask = launch.restrict(mask, r)
        buffer = launch.buffers[ptr.buffer]
        if mask is None or mask.all():
            offsets = ptr.offsets if mask is None else np.broadcast_to(ptr.offsets, np.broadcast_shapes(
                np.shape(ptr.offsets), np.shape(mask)))
            self._check(launch, op, "load", ptr.buffer, offsets, None, r)
            return (buffer[offsets],)
        other = other if other is not None else buffer.dtype.type(0)
        shape = np.broadcast_shapes(np.shape(ptr.offsets), np.shape(mask), np.shape(other))
        offsets, mask = np.broadcast_to(ptr.offsets, shape), np.broadcast_to(mask, shape)
        result = np.array(np.broadcast_to(other, shape), dtype=buffer.dtype)
        index = offsets[mask]
        self._check(launch, op, "load", ptr.buffer, index, (offsets, mask), r)
        result[mask] = buffer[index]
        return (result[()] if result.ndim == 0 else result,)

    @impl(tt.DescriptorStoreOp)
    def run_descriptor_store(
        self, interpreter: Interpreter, op: tt.DescriptorStoreOp, args: PythonValues
    ) -> PythonValues:
        """The masked store it stands for (its descriptor operands only matter to TMA)."""
        return self._store(interpreter, op, args)

    @impl(tt.StoreOp)
    def run_store(self, interpreter: Interpreter, op: tt.StoreOp, args: PythonValues) -> PythonValues:
        return self._store(interpreter, op, args)

    def _store(
        self, interpreter: Interpreter, op: tt.StoreOp | tt.DescriptorStoreOp, args: PythonValues
    ) -> PythonValues:
        launch = self.launch(interpreter)
        ptr: Pointer = args[0]
        value = args[1]
        r = rank(op.ptr.type)
        mask = launch.restrict(args[2] if op.mask is not None else None, r)
        buffer = launch.buffers[ptr.buffer]
        if not buffer.flags.writeable:
            number, name = launch.buffer_args[ptr.buffer]
            raise SimulatorError(f"tt.store into argument '{name}' (#{number}), a read-only array")
        shape = np.broadcast_shapes(np.shape(ptr.offsets), np.shape(value), np.shape(mask))
        offsets, values = np.broadcast_to(ptr.offsets, shape), np.broadcast_to(value, shape)
        if mask is None or mask.all():
            index, values = offsets.reshape(-1), values.reshape(-1)
            self._check(launch, op, "store", ptr.buffer, index, (offsets, None), r)
        else:
            mask = np.broadcast_to(mask, shape)
            index, values = offsets[mask], values[mask]
            self._check(launch, op, "store", ptr.buffer, index, (offsets, mask), r)
        scatter(buffer, index, values)
        return ()

    def _check(
        self,
        launch: Launch,
        op: tt.LoadOp | tt.DescriptorLoadOp | tt.StoreOp | tt.AtomicRMWOp | tt.AtomicCASOp,
        access: str,
        buffer: int,
        index: Any,
        full: tuple[Any, Any] | None,
        r: int,
    ) -> None:
        """Raise `OutOfBoundsError` if an element of `index` (the active lanes' offsets) is outside `buffer`.

        `full` is (offsets, mask) of all lanes when `index` is a selection of them, to locate the culprit.
        """
        size = launch.buffers[buffer].size
        if np.size(index) == 0 or (np.min(index) >= 0 and np.max(index) < size):
            return
        offsets, mask = full if full is not None else (index, None)
        bad = (offsets < 0) | (offsets >= size)
        if mask is not None:
            bad &= mask
        program, lane = launch.locate(bad, r)
        position = (Ellipsis,) if np.ndim(offsets) == 0 else np.unravel_index(int(np.argmax(bad)), np.shape(bad))
        number, name = launch.buffer_args[buffer]
        raise OutOfBoundsError(
            access=access,
            argument=name,
            argument_number=number,
            size=size,
            dtype=str(launch.buffers[buffer].dtype),
            program=program,
            index=int(np.asarray(offsets)[position]),
            lane=lane,
            masked=getattr(op, "mask", None) is not None,
            op_text=self.op_text(op),
        )
