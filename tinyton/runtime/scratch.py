"""The intermediates' block of array programs, kept per thread and stream and reused across calls.

The intermediates of one array-program call live in one block of device memory (tinyton/compiler/launch_plan.py).
Launches on one stream run in order, so once a call has enqueued its launches, the next call on that stream may
reuse its block: `Scratch` keeps one block per thread and stream (growing it when a program needs more), which
saves the call an allocation (a CUDA `torch.empty` costs several µs of host time on the GPU hosts). Per thread
too, because two threads calling programs on one stream interleave their launches. Not kept:

- blocks over `MAX_SCRATCH_BYTES`: such programs allocate per call (the caching allocator keeps that memory
  for everything else between calls);
- blocks of a stream being captured into a CUDA graph: the graph bakes the address into its launches, and its
  replays may run on another stream, alongside later calls. A capture gets a fresh block per call, which the
  graph keeps alive (torch's graph pool, `CudaGraph.buffers`). The legacy default stream (handle 0) cannot be
  captured, so calls on it skip the check (a driver call).

A kept block is allocated as owned by its stream (`allocate(nbytes, stream)`), so when it is replaced or its
thread ends, the allocator frees it in that stream's order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tinyton.runtime import driver

MAX_SCRATCH_BYTES = 16 << 20
"""The largest intermediates' block kept between calls (16 MiB)."""


class Scratch:
    """Blocks of device memory per (thread, stream): `scratch(stream, nbytes) -> (block, address)`."""

    def __init__(self, allocate: Callable[[int, int | None], Any], address: Callable[[Any], int]):
        """`allocate(nbytes, stream)`: a new block owned by `stream` (None: a block for one call, allocated as
        the caller's other buffers are); `address(block)`: its device address."""
        self._allocate, self._address = allocate, address
        self._local = threading.local()

    def __call__(self, stream: int, nbytes: int) -> tuple[Any, int]:
        """A block of at least `nbytes` for launches on `stream`, and its address; the caller holds the block
        until its launches are enqueued (a capture's block is not kept here)."""
        blocks = self._local.__dict__
        entry = blocks.get(stream)
        if stream and driver.stream_capturing(stream):
            return self._new(nbytes, None)
        if entry is not None and entry[1] >= nbytes:
            return entry[0]
        block = self._new(nbytes, stream)
        blocks[stream] = (block, nbytes)
        return block

    def _new(self, nbytes: int, stream: int | None) -> tuple[Any, int]:
        block = self._allocate(nbytes, stream)
        return block, self._address(block)

    def blocks(self) -> dict[int, int]:
        """Bytes kept per stream for the calling thread (for tests and for reading)."""
        return {stream: nbytes for stream, (_, nbytes) in self._local.__dict__.items()}
