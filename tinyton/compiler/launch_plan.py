"""The call path of a compiled array program for one kind of inputs, with everything fixed bound in.

For device memory (tinyton/runtime/memory.py) it is one generated function, straight-line Python: read
each input's address, allocate each output (torch's caching allocator for torch inputs, in its cheapest
spelling), read the stream once, take the one block for all intermediates (the stream's kept block,
tinyton/runtime/scratch.py; a large one allocated per call), call each kernel's launch bound to its grid
(`Launcher.bind`), return the results. Host memory (the simulator, or host inputs staged on the GPU) takes a generic loop:
those calls copy whole arrays anyway. The counters of grid barriers (split rows in one kernel) come last
among the buffers: zeroed once per stream and kept, since each barrier leaves its counter as it found it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyton.compiler.kernel import CompiledKernel
from tinyton.runtime import arrays, driver
from tinyton.runtime.memory import DeviceMemory, HostMemory
from tinyton.runtime.scratch import MAX_SCRATCH_BYTES
from tinyton.runtime.streams import current_stream

OVERLAP_ENV = "TINYTON_OVERLAP_LAUNCHES"
"""`0`: no kernel of an array program starts before the one before it completes (see `overlapping_launches`)."""


def overlap_enabled() -> bool:
    """Whether a program's kernels may start while the one before finishes (`TINYTON_OVERLAP_LAUNCHES=0`: never)."""
    return os.environ.get(OVERLAP_ENV, "1") != "0"


TRIGGER_ENV = "TINYTON_TRIGGER_DEPENDENTS"
"""`0`: an overlapping kernel does not let the next launch start before all its programs have exited; by default it
does once each of them has left its main loop (`tinyton/lowering/tt_to_llvm/grid_dependency.py`)."""


def trigger_enabled() -> bool:
    """Whether overlapping kernels trigger their dependents after their main loop (`TINYTON_TRIGGER_DEPENDENTS=0`:
    never)."""
    return os.environ.get(TRIGGER_ENV, "1") != "0"


INTERMEDIATE_ALIGNMENT = 256
"""Bytes between the intermediates packed in one allocation (what cudaMalloc guarantees per allocation)."""

Runner = Callable[[tuple], Any]
"""`runner(args)`: the program's result for the Python call's positional arguments."""


@dataclass(frozen=True)
class Launches:
    """What a call does, independent of the memory: buffers, kernels in order, results."""

    input_positions: tuple[int, ...]
    """The Python arguments that are the program's inputs: buffers 0, 1, ..."""
    buffer_specs: Sequence[tuple[tuple[int, ...], np.dtype]]
    """(shape, dtype) of every buffer: the inputs, then the intermediates and outputs."""
    kernels: Sequence[tuple[CompiledKernel, tuple[int, int, int], tuple[int, ...]]]
    """(kernel, grid, buffer index of each parameter) per launch, in program order."""
    outputs: tuple[int, ...]
    returns_tuple: bool
    counters: Sequence[tuple[int, ...]] = ()
    """Shapes of the grid barriers' i32 counter buffers, after `buffer_specs` in buffer order."""
    updates: tuple[int, ...] = ()
    """The inputs (buffers 0, 1, ...) the kernels write into: copied back to the caller's array after the
    launches where the call path made a copy of it."""


class _WrittenApart:
    """Whether the inputs a program writes share no byte with its other inputs, for one call's addresses (the
    last answer kept: a decode loop passes the same buffers every step). Only then may a kernel load a read-only
    input while the kernel before it still writes (`Launches.overlaps`): a weight that is also the cache it
    updates must wait like any value written in the program."""

    def __init__(self, launches: Launches):
        n = len(launches.input_positions)
        self._written = np.array([i in launches.updates for i in range(n)])
        self._self_meets = (np.arange(len(launches.updates)), np.flatnonzero(self._written))
        """Each written buffer's own column in the table of which buffers meet."""
        self._sizes = np.array([math.prod(shape) * np.dtype(dtype).itemsize
                                for shape, dtype in launches.buffer_specs[:n]], np.int64)  # fmt: skip
        self._last: tuple[tuple[int, ...], bool] | None = None

    def __call__(self, addresses: tuple[int, ...]) -> bool:
        if self._last is not None and self._last[0] == addresses:
            return self._last[1]
        starts = np.array(addresses, np.int64)
        ends = starts + self._sizes
        written = self._written
        meet = (starts[written, None] < ends[None, :]) & (starts[None, :] < ends[written, None])
        meet[self._self_meets] = False  # a buffer meets itself
        apart = not meet.any()
        self._last = (addresses, apart)
        return apart


def overlapping_launches(launches: Launches) -> list[bool]:
    """Per launch: whether it may start while the launch before it finishes (tinyton/lowering/tt_to_llvm/
    grid_dependency.py). Never the first: what ran before the program is not its business. None with
    `TINYTON_OVERLAP_LAUNCHES=0` when the call path is made (kernels compiled to overlap then run as plain ones:
    their wait does nothing)."""
    if not overlap_enabled():
        return [False] * len(launches.kernels)
    return [k > 0 and kernel.overlaps_prior_grid for k, (kernel, _, _) in enumerate(launches.kernels)]


class _Counters:
    """The counter buffers of one call path per stream (two streams at once must not share one)."""

    def __init__(self, shapes: Sequence[tuple[int, ...]], zeros: Callable[[tuple[int, ...]], Any]):
        self._shapes, self._zeros, self._by_stream = shapes, zeros, {}

    def __call__(self, stream: int | None) -> list[Any]:
        got = self._by_stream.get(stream)
        if got is None:
            got = self._by_stream[stream] = [self._zeros(shape) for shape in self._shapes]
        return got


def runner(launches: Launches, memory: HostMemory | DeviceMemory) -> Runner:
    """The call path of `launches` with its buffers in `memory`."""
    if isinstance(memory, DeviceMemory):
        return _generated(launches, memory)
    return _looped(launches, memory)


def _looped(launches: Launches, memory: HostMemory) -> Runner:
    prepare, allocate, finish, address = memory.prepare, memory.allocate, memory.finish, memory.address
    write_back, check_writable = memory.write_back, memory.check_writable
    temporaries = launches.buffer_specs[len(launches.input_positions) :]
    positions, outputs, single = launches.input_positions, launches.outputs, not launches.returns_tuple
    host_results = memory.host_results
    zeros = np.zeros if address is None else arrays.zeros
    counters = _Counters(launches.counters, lambda shape: zeros(shape, np.int32))

    updates = launches.updates
    overlap = overlapping_launches(launches) if address is not None else []
    apart = _WrittenApart(launches)

    def run(args: tuple) -> Any:
        for i in updates:
            check_writable(args[positions[i]], i)
        buffers = [prepare(args[i]) for i in positions] + [allocate(shape, dtype) for shape, dtype in temporaries]
        if address is None:
            buffers += counters(None)
            for kernel, grid, slots in launches.kernels:
                kernel.simulate(grid, [buffers[i] for i in slots])
        else:
            stream = current_stream()
            buffers += counters(stream)
            addresses = [address(b) for b in buffers]
            safe = not (updates and any(overlap)) or apart(tuple(addresses[: len(positions)]))
            for (kernel, grid, slots), early in zip(launches.kernels, overlap):
                launch = kernel.launcher.bind(grid, kernel.threads, overlap=early and safe)
                launch(stream, tuple([addresses[i] for i in slots]))
            if stream and (host_results or updates):  # the copies back below run on the default stream
                driver.stream_synchronize(stream)
        for i in updates:
            write_back(args[positions[i]], buffers[i])
        results = tuple([finish(buffers[i]) for i in outputs])
        return results[0] if single else results

    return run


def _generated(launches: Launches, memory: DeviceMemory) -> Runner:
    """`def run(args)` for these launches, as source text: no loops, no per-buffer dispatch."""
    namespace: dict[str, Any] = dict(memory.namespace)
    lines: list[str] = []

    def emit(snippet: str, **names: str) -> None:
        lines.extend("    " + line for line in snippet.format(**names).splitlines())

    n_inputs = len(launches.input_positions)
    for i, position in enumerate(launches.input_positions):
        emit(memory.input, x=f"b{i}", p=f"p{i}", arg=f"args[{position}]")
    results = set(launches.outputs)
    packed, offset = [], 0
    for i, (shape, dtype) in enumerate(launches.buffer_specs[n_inputs:], n_inputs):
        if i in results:
            dims = ", ".join(map(str, shape)) or "()"
            same = memory.allocate_same is not None and np.dtype(dtype) == np.dtype(launches.buffer_specs[0][1])
            namespace[f"D{i}"] = memory.dtype_value(dtype)
            allocate = memory.allocate_same if same else memory.allocate
            emit(f"b{i} = {allocate}", like="b0", dims=dims, shape=repr(tuple(shape)), dtype=f"D{i}")
            emit(f"p{i} = {memory.address}", x=f"b{i}")
        else:  # an intermediate: a slice of one block for all of them
            packed.append((i, offset))
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            offset += -(-nbytes // INTERMEDIATE_ALIGNMENT) * INTERMEDIATE_ALIGNMENT
    emit(memory.stream)
    if packed and offset <= MAX_SCRATCH_BYTES:
        namespace["SCRATCH"] = memory.scratch
        lines.append(f"    block, pb = SCRATCH(s, {offset})")
    elif packed:
        namespace["DB"] = memory.dtype_value(np.dtype(np.uint8))
        emit(f"block = {memory.allocate}", like="b0", dims=str(offset), shape=f"({offset},)", dtype="DB")
        emit(f"pb = {memory.address}", x="block")
    lines.extend(f"    p{i} = pb + {o}" for i, o in packed)
    if launches.counters:
        namespace["COUNTERS"] = _Counters(launches.counters, memory.counter)
        lines.append("    cs = COUNTERS(s)")
        for j in range(len(launches.counters)):
            emit(f"p{len(launches.buffer_specs) + j} = {memory.address}", x=f"cs[{j}]")
    overlap = overlapping_launches(launches)
    checked = bool(launches.updates) and any(overlap)
    if checked:  # launches that overlap the one before only where the written inputs share no byte with the rest
        namespace["APART"] = _WrittenApart(launches)
        lines.append(f"    apart = APART(({''.join(f'p{i}, ' for i in range(n_inputs))}))")
    for k, (kernel, grid, slots) in enumerate(launches.kernels):
        namespace[f"L{k}"] = kernel.launcher.bind(grid, kernel.threads, overlap=overlap[k])
        launch = f"L{k}"
        if checked and overlap[k]:
            namespace[f"S{k}"] = kernel.launcher.bind(grid, kernel.threads)
            launch = f"(L{k} if apart else S{k})"
        lines.append(f"    {launch}(s, ({''.join(f'p{i}, ' for i in slots)}))")
    for i in launches.updates:
        emit(memory.write_back, x=f"b{i}", arg=f"args[{launches.input_positions[i]}]")
    values = [f"b{i}" for i in launches.outputs]
    lines.append(f"    return ({', '.join(values)},)" if launches.returns_tuple else f"    return {values[0]}")
    source = "def run(args):\n" + "\n".join(lines)
    exec(source, namespace)  # noqa: S102 - built from the snippets above and numbered names only
    run = namespace["run"]
    run.source = source  # what it does, for tests and for reading
    return run
