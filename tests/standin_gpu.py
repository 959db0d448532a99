"""A stand-in GPU: the host path of launches and array-program calls, run and measured without a GPU.

Inside `standin_gpu()` the backend says cuda; every kernel's driver `Launcher` is a real one whose C entry
point is libc's `strnlen` (called with cuLaunchKernelEx's arguments and a null function handle, its
length limit, it returns 0: success) instead of cuLaunchKernelEx, so everything above that call runs as on a GPU host; CPU torch tensors
given to array programs are treated as device memory (torch's allocator stands for the caching allocator
of CUDA tensors; torch's current stream reads as 0). Kernels compute nothing: results are garbage, the path and its time are real.
`launches` records (kernel name, grid, parameter values) when `record=True`.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np

from tinyton.compiler import kernel as compiler_kernel
from tinyton.compiler import program as compiler_program
from tinyton.frontend import programs
from tinyton.runtime import arrays, driver, memory
from tinyton.runtime.launch import Launcher
from tinyton.runtime.scratch import Scratch

NO_LAUNCH = ctypes.CDLL(None).strnlen
"""strnlen(config, 0, ...) == 0: a C call with cuLaunchKernelEx's arguments (the function handle 0) that does
nothing and succeeds."""


class RecordingLauncher(Launcher):
    def __init__(self, name: str, kinds: Any, launches: list):
        super().__init__(SimpleNamespace(address=0), kinds, 0, launch_kernel=NO_LAUNCH)
        self.name, self.launches = name, launches

    def bind(self, grid, block_threads, shared_bytes=0, *, overlap=False):
        launch = super().bind(grid, block_threads, shared_bytes, overlap=overlap)

        def record(stream, values):
            self.launches.append((self.name, grid, values))
            launch(stream, values)

        return record


def device_array(shape: tuple[int, ...], dtype: Any = np.float32, ptr: int = 1 << 32) -> arrays.DeviceArray:
    """A `DeviceArray` at a made-up address (nothing is allocated; freeing it fails quietly)."""
    array = arrays.DeviceArray.__new__(arrays.DeviceArray)
    array.shape, array.dtype = tuple(shape), np.dtype(dtype)
    array.nbytes, array.ptr, array.device_ordinal = int(np.prod(shape)) * array.dtype.itemsize, ptr, 0
    array._argument = arrays.KernelArgument(ptr, array.dtype, True)
    return array


def _cpu_block(nbytes: int) -> Any:
    import torch  # CPU torch tensors came in: torch is imported

    return torch.empty(nbytes, dtype=torch.uint8)


def _no_stream() -> int:
    return 0


def _forget(functions: tuple[Any, ...]) -> None:
    """Drop what the `@tt.jit` `functions` compiled and cached (runners and launch plans are per backend)."""
    for fn in functions:
        programs._PROGRAMS.pop(fn.fn, None)
        fn._calls = programs.ProgramCalls(fn.fn)
        for cache in (fn._plans, fn._variants, fn._reads, fn._bound, fn._call_shapes):
            cache.clear()
        fn._launch_fast = None


@contextmanager
def standin_gpu(*functions: Any, record: bool = False) -> Iterator[list]:
    """The stand-in GPU; the array programs `functions` start and end with empty caches."""
    launches: list = []

    def launcher(kernel: compiler_kernel.CompiledKernel) -> Launcher:
        if 0 not in kernel._launchers:
            kernel._launchers[0] = (
                RecordingLauncher(kernel.name, kernel.param_kinds, launches)
                if record
                else Launcher(SimpleNamespace(address=0), kernel.param_kinds, 0, launch_kernel=NO_LAUNCH)
            )
        return kernel._launchers[0]

    real_memory_for = memory.memory_for
    scratch = Scratch(lambda nbytes, stream: _cpu_block(nbytes), lambda block: block.data_ptr())

    def memory_for(inputs: Any, on_gpu: bool) -> Any:
        if inputs and all(type(x).__module__.startswith("torch") and not x.is_cuda for x in inputs):
            torch_memory = memory._torch_memory(inputs[0].device)  # CPU torch reads no CUDA stream
            return dataclasses.replace(
                torch_memory, namespace={**torch_memory.namespace, "TORCH_STREAM": _no_stream}, scratch=scratch
            )
        return real_memory_for(inputs, on_gpu)

    _forget(functions)
    with ExitStack() as stack:
        stack.callback(_forget, functions)
        stack.enter_context(mock.patch.object(driver, "backend", lambda: "cuda"))
        stack.enter_context(mock.patch.object(compiler_kernel.CompiledKernel, "launcher", property(launcher)))
        stack.enter_context(mock.patch.object(compiler_program, "memory_for", memory_for))
        yield launches
