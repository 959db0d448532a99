"""Kernels on the GPU: a loaded image (`Module`), its kernels (`Function`) and their launches (`Launcher`).

A `Launcher` belongs to the device its function was loaded on and makes that device current before it
launches, so a launch never goes to another device's context. It prepares the parameter buffer and the launch
configuration once, so that a launch only writes the values and calls `cuLaunchKernelEx` with four prebuilt
arguments.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tinyton.runtime import driver
from tinyton.runtime.devices import current_device


class Module:
    """A loaded PTX/cubin image; it stays loaded while any of its functions is alive."""

    def __init__(self, image: bytes, ordinal: int | None = None):
        """Load `image` on device `ordinal` (default: the current device)."""
        self.ordinal = current_device() if ordinal is None else ordinal
        driver.use_device(self.ordinal)
        self._module = driver.call(driver.driver_api().cuModuleLoadData, image)

    @classmethod
    def from_ptx(cls, ptx: str, ordinal: int | None = None) -> Module:
        return cls(ptx.encode() + b"\0", ordinal)

    def function(self, name: str, *, dynamic_shared_bytes: int = 0) -> Function:
        """The kernel `name`, allowed `dynamic_shared_bytes` of dynamic shared memory."""
        fn = Function(self, driver.call(driver.driver_api().cuModuleGetFunction, self._module, name.encode()), name)
        if dynamic_shared_bytes > driver.STATIC_SHARED_LIMIT:
            fn.set_max_dynamic_shared(dynamic_shared_bytes)
        return fn

    def __del__(self, _release=driver.release):  # bound now: module globals are gone at interpreter exit
        _release("cuModuleUnload", getattr(self, "_module", None))


class Function:
    """A kernel of a `Module`."""

    def __init__(self, module: Module, handle: Any, name: str):
        self.module = module
        self.handle = handle
        self.address = int(handle)
        self.name = name

    def attribute(self, name: str) -> int:
        """`cuFuncGetAttribute`, e.g. `attribute("NUM_REGS")`, `"SHARED_SIZE_BYTES"`."""
        drv = driver.driver_api()
        attr = getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return driver.call(drv.cuFuncGetAttribute, attr, self.handle)

    def max_active_blocks(self, threads: int, dynamic_shared: int = 0) -> int:
        """Programs of `threads` threads one SM holds at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`)."""
        drv = driver.driver_api()
        return driver.call(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor, self.handle, threads, dynamic_shared)

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Opt in to more than 48 KiB of dynamic shared memory."""
        drv = driver.driver_api()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.call(drv.cuFuncSetAttribute, self.handle, attr, nbytes)


def _param_dtype(kind: str | npt.DTypeLike) -> np.dtype:
    return np.dtype(np.uint64 if kind == driver.POINTER else kind)


class LaunchAttribute(ctypes.Structure):
    """`CUlaunchAttribute`: an id, then a 64-byte value union at offset 8 (cuda.h)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class LaunchConfig(ctypes.Structure):
    """`CUlaunchConfig`: what `cuLaunchKernelEx` takes besides the function and its parameters."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(LaunchAttribute)),
        ("num_attrs", ctypes.c_uint),
    ]


LAUNCH_ATTRIBUTE_COOPERATIVE = 2
"""`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`: every program runs at once, or the launch is refused (grid barriers)."""

LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
"""`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: the launch may start once every program of the
launch before it has passed `griddepcontrol.launch_dependents` (or exited), not once that launch completed; the
kernel's `griddepcontrol.wait` waits for the rest (tinyton/lowering/tt_to_llvm/grid_dependency.py)."""

MAX_BOUND = 4096
"""Launches bound per `Launcher` (one per grid, block and shared size), and configurations per bound launch
(one per stream), before that table is reset."""

Launch = Callable[[int, tuple[Any, ...]], None]
"""`launch(stream, values)`: one kernel launch with a fixed grid, block and shared memory size."""


class Launcher:
    """
    Launches one kernel with a fixed parameter signature, as cheaply as Python allows.

    The parameter values live in a one-element numpy record (naturally aligned fields), and the `void*[]`
    array pointing at each field is built once. `bind(grid, threads, shared)` returns the launch of one
    configuration: it assigns the values tuple to the record (one C-level conversion for all fields) and
    calls `cuLaunchKernelEx` through ctypes without `argtypes` with four prebuilt arguments: the
    configuration (grid, block, shared memory, stream: one `CUlaunchConfig` per stream, made on its first
    launch), the function, the parameter array and a null `extra`. Four arguments convert in ~60 % of the
    time of cuLaunchKernel's eleven (measured: docs/benchmarks-history.md, branch `host4`). `param_kinds` holds
    `POINTER` or numpy dtype names (`"i4"`, `"f4"`...).
    """

    def __init__(
        self,
        function: Function,
        param_kinds: Sequence[str | npt.DTypeLike],
        dynamic_shared: int = 0,
        appended: Sequence[Callable[[tuple[Any, ...], int], int]] = (),
        launch_kernel: Callable[..., int] | None = None,
        *,
        cooperative: bool = False,
    ):
        """`dynamic_shared`: bytes of dynamic shared memory the kernel declares (`extern .shared`), added to
        every launch's `shared_bytes`; `appended`: pointer parameters the kernel takes after its own, each
        computed from a launch's values and stream (the TMA maps, tinyton/runtime/tensor_maps.py); `launch_kernel`: the
        C function called with cuLaunchKernelEx's arguments (default: the driver's; a stand-in measures the
        host path without a GPU); `cooperative`: launch with the cooperative attribute, which runs every
        program at once or refuses (a kernel with a grid barrier)."""
        self.function = function
        self.ordinal: int | None = function.module.ordinal if launch_kernel is None else None
        """The device the function was loaded on: each launch makes its context current first (None: a
        stand-in `launch_kernel`, no device)."""
        self.dynamic_shared = dynamic_shared
        self._appended = tuple(appended)
        kinds = [*param_kinds, *[driver.POINTER] * len(self._appended)]
        fields = [(f"p{i}", _param_dtype(k)) for i, k in enumerate(kinds)]
        self._values = np.zeros(1, np.dtype(fields, align=True))
        base = self._values.ctypes.data
        offsets = [self._values.dtype.fields[name][1] for name, _ in fields]
        self._pointers = np.array([base + o for o in offsets], np.uint64)
        self._params = ctypes.c_void_p(self._pointers.ctypes.data) if fields else None
        self._launch = launch_kernel or driver.with_context().launch_kernel_ex
        self._func = ctypes.c_void_p(function.address)
        self._cooperative = cooperative
        self._bound: dict[tuple[tuple[int, int, int], int, int, bool], Launch] = {}

    def _attributes(self, overlap: bool) -> tuple[Any, int]:
        """The `CUlaunchAttribute` array of a launch (kept alive by its configuration) and its length."""
        wanted = [(LAUNCH_ATTRIBUTE_COOPERATIVE, self._cooperative),
                  (LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, overlap)]  # fmt: skip
        ids = [attribute for attribute, on in wanted if on]
        array = (LaunchAttribute * max(1, len(ids)))()
        for entry, attribute in zip(array, ids):
            entry.id, entry.value = attribute, 1
        return array, len(ids)

    def bind(self, grid: tuple[int, int, int], block_threads: int, shared_bytes: int = 0, *,
             overlap: bool = False) -> Launch:
        """The launch of this grid, block and shared memory size: `launch(stream, values)` enqueues it on
        the stream with this raw handle (0: the default stream) with these parameter values. Bound once per
        configuration and kept: every caller of one configuration shares its launch. `overlap`: launch with
        programmatic stream serialization (the kernel must wait for the launch before it: `griddepcontrol.wait`)."""
        key = (grid, block_threads, shared_bytes, overlap)
        bound = self._bound.get(key)
        if bound is None:
            if len(self._bound) >= MAX_BOUND:
                self._bound.clear()
            bound = self._bound[key] = self._make_launch(grid, block_threads, shared_bytes, overlap)
        return bound

    def _make_launch(self, grid: tuple[int, int, int], block_threads: int, shared_bytes: int,
                     overlap: bool = False) -> Launch:
        configs: dict[int, Any] = {}
        record, params, launch_kernel, func, appended = self._values, self._params, self._launch, self._func, self._appended
        ordinal, switch = self.ordinal, self.ordinal is not None
        thread, devices = driver.thread_device, driver.devices_in_use
        attributes, num_attributes = self._attributes(overlap)

        def config(stream: int) -> Any:
            if len(configs) >= MAX_BOUND:
                configs.clear()
            made = LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(block_threads, 1, 1))
            made.shared_bytes, made.stream = shared_bytes + self.dynamic_shared, stream or None
            made.attrs, made.num_attrs = attributes, num_attributes
            configs[stream] = ctypes.byref(made)  # keeps `made` alive
            return configs[stream]

        def launch(stream: int, values: tuple[Any, ...]) -> None:
            if switch and (devices.multi or thread.ordinal != ordinal):
                driver.use_device(ordinal)
            if appended:
                values = (*values, *(pointer(values, stream) for pointer in appended))
            if params is not None:
                record[0] = values
            err = launch_kernel(configs.get(stream) or config(stream), func, params, None)
            if err:
                raise driver.CudaError("cuLaunchKernelEx", err)

        return launch

    def launch(
        self,
        grid: tuple[int, int, int],
        block_threads: int,
        shared_bytes: int,
        stream: int,
        values: tuple[Any, ...],
    ) -> None:
        """Enqueue one launch; `stream` is a `Stream.handle` or 0 for the default stream (the launch of
        `bind(grid, block_threads, shared_bytes)`)."""
        self.bind(grid, block_threads, shared_bytes)(stream, values)
