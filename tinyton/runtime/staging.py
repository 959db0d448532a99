"""Staging a launch's host arrays on the device, with arrays that share memory staged together.

Each host array (a NumPy array, a CPU torch tensor) is copied to the device as its memory span
(tinyton/runtime/spans.py) and copied back after the launch when the kernel writes it. Arrays whose spans
overlap (`add_kernel(x, y, x, n)`, or partly overlapping views of one base array) are staged *once*: the union
of their spans is one device buffer, each array's pointer its place in that buffer, and the union is copied
back once if the kernel writes any of them. So writes through one argument are seen through the others, as
on the simulator (which works on the arrays' own memory) and as with device arrays. The union keeps each
array's address modulo 16, which the kernel variant was specialised on.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyton.runtime import device_memory
from tinyton.runtime.arrays import DeviceArray, KernelArgument, as_kernel_argument
from tinyton.runtime.spans import memory_span, span_bounds
from tinyton.runtime.torch_interop import host_view

ALIGNMENT = 16
"""The address alignment the kernel variants are specialised on (`tt.divisibility = 16`)."""


@dataclass
class SharedStaging:
    """One device buffer for host arrays that share memory: the bytes `[start, end)` of host memory, placed at
    `pad = start % ALIGNMENT` in the buffer."""

    start: int
    end: int
    buffer: DeviceArray

    @property
    def pad(self) -> int:
        return self.start % ALIGNMENT

    def host_bytes(self) -> np.ndarray:
        """The host memory as a byte array (the arrays of the group keep it alive for the launch)."""
        return np.ctypeslib.as_array((ctypes.c_uint8 * (self.end - self.start)).from_address(self.start))

    def copy_back(self, stream: int | None = None) -> None:
        device_memory.memcpy_dtoh(self.host_bytes(), self.buffer.ptr + self.pad, stream)


def host_memory(arg: Any) -> np.ndarray | None:
    """The host array behind a launch argument (None for device data and scalars)."""
    if isinstance(arg, np.ndarray):
        return arg
    cls = type(arg)
    if cls.__module__.partition(".")[0] == "torch" and hasattr(cls, "data_ptr") and not arg.is_cuda:
        return host_view(arg)
    return None


def alias_groups(arrays: dict[int, np.ndarray]) -> list[list[int]]:
    """The argument numbers of `arrays` grouped by shared memory: overlapping spans, transitively."""
    bounds = sorted((span_bounds(memory_span(a)), i) for i, a in arrays.items() if a.size)
    groups: list[list[int]] = []
    end = -1
    for (lo, hi), i in bounds:
        if groups and lo < end:
            groups[-1].append(i)
            end = max(end, hi)
        else:
            groups.append([i])
            end = hi
    return [sorted(g) for g in groups]


def stage_arguments(args: Sequence[Any], written: frozenset[int]) -> tuple[list[KernelArgument], list[Any]]:
    """The launch's arguments, host arrays staged on the device; and what to `copy_back()` after the launch."""
    hosts = {i: h for i, a in enumerate(args) if (h := host_memory(a)) is not None}
    arguments: list[KernelArgument | None] = [None] * len(args)
    back: list[Any] = []
    for group in alias_groups(hosts):
        if len(group) == 1:
            continue
        spans = [span_bounds(memory_span(hosts[i])) for i in group]
        start, end = min(lo for lo, _ in spans), max(hi for _, hi in spans)
        shared = SharedStaging(start, end, DeviceArray(end - start + start % ALIGNMENT, np.uint8))
        device_memory.memcpy_htod(shared.buffer.ptr + shared.pad, shared.host_bytes())
        for i, (lo, _) in zip(group, spans):
            arguments[i] = KernelArgument(shared.buffer.ptr + shared.pad + lo - start, hosts[i].dtype, True)
        if written & set(group):
            back.append(shared)
    for i, arg in enumerate(args):
        if arguments[i] is None:
            arguments[i] = as_kernel_argument(arg)
            if i in written:
                back.append(arguments[i])
    return arguments, back  # type: ignore[return-value]
