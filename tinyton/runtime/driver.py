"""
A thin layer over the CUDA driver API (cuda-python's `cuda.bindings.driver`).

Importing this module touches no driver: the first call that needs the GPU runs `cuInit`
(reading the device's attributes needs no more), the first allocation, module load or launch
makes the current device's primary context current on the calling thread. Every driver failure is
raised as a `CudaError` naming the call and the CUDA error.

Every device of the host can be used, one primary context each (CUDA's runtime-API model):
`use_device(n)` makes device n's context current on the calling thread, and allocations, module
loads and streams belong to the device current when they are made. Kernels are loaded and launched
through tinyton/runtime/launch.py (`Module`, `Launcher`), on this module's contexts.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from tinyton.runtime.devices import current_device, set_device
from tinyton.runtime.streams import explicit_stream, torch_stream, torch_stream_reader

STATIC_SHARED_LIMIT = 48 * 1024
"""Bytes of shared memory a kernel may declare statically; beyond, it opts in to dynamic shared memory."""
POINTER = "ptr"
"""Parameter kind of a device pointer (a `u64`); other kinds are numpy dtype names."""
GRID_LIMITS = (2**31 - 1, 65535, 65535)
"""CUDA's largest grid (x, y, z); launches beyond it are refused before they start, on the simulator too."""


class CudaError(RuntimeError):
    """A driver call failed; `name` is the CUDA error name, e.g. `CUDA_ERROR_INVALID_VALUE`."""

    def __init__(self, call: str, code: int):
        self.call = call
        self.code = int(code)
        self.name, description = _describe(code)
        super().__init__(f"{call} failed: {self.name} ({description})")


CONTEXT_FAULTS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
})
"""Errors after which the CUDA context cannot be used again (a kernel faulted): every later call in the process
fails with the same error."""


def faulted(error: BaseException) -> bool:
    """Whether `error` is a kernel fault that left the CUDA context unusable (`CONTEXT_FAULTS`)."""
    return isinstance(error, CudaError) and error.name in CONTEXT_FAULTS


def _describe(code: int) -> tuple[str, str]:
    drv = driver_api()
    try:
        result = drv.CUresult(int(code))
        return drv.cuGetErrorName(result)[1].decode(), drv.cuGetErrorString(result)[1].decode()
    except Exception:
        return f"CUresult {int(code)}", "unknown error"


@cache
def driver_api() -> Any:
    """cuda-python's `cuda.bindings.driver` module, imported on first use."""
    from cuda.bindings import driver

    return driver


def call(fn: Callable[..., tuple[Any, ...]], *args: Any) -> Any:
    """Call a driver function; return its single output (or the tuple, or None); `CudaError` on failure."""
    err, *outputs = fn(*args)
    if err != driver_api().CUresult.CUDA_SUCCESS:
        raise CudaError(fn.__name__, err)
    if len(outputs) > 1:
        return tuple(outputs)
    return outputs[0] if outputs else None


@dataclass(frozen=True)
class Device:
    """The properties of a GPU that the compiler and the launcher need."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_shared_per_block: int
    max_shared_per_block_optin: int
    total_memory: int
    max_registers_per_block: int
    clock_rate_khz: int
    memory_clock_rate_khz: int
    memory_bus_width: int


class _Driver:
    """The driver initialised and its devices counted: enough to read their attributes (the compile's
    target and SM count). A device's primary context, which allocations and launches need, is made on first
    use (`use_device`): on an H100 host `cuInit` took 104-224 ms and the primary context 125-156 ms more,
    which a compile to PTX need not pay."""

    def __init__(self):
        # First: where no driver library is installed this fails in microseconds, before cuda-python's
        # import (~20 ms) would have been paid to learn the same (a compile on a machine without a GPU asks).
        libcuda = ctypes.CDLL("libcuda.so.1")
        drv = driver_api()
        call(drv.cuInit, 0)
        self.count = call(drv.cuDeviceGetCount)
        if self.count < 1:
            raise RuntimeError("the CUDA driver reports no device")
        self.handles = [call(drv.cuDeviceGet, i) for i in range(self.count)]
        # Launches bypass cuda-python's argument conversion, and ctypes' too (no
        # `argtypes`): see `Launcher`.
        self.launch_kernel_ex = libcuda.cuLaunchKernelEx
        self.is_capturing = libcuda.cuStreamIsCapturing
        self.set_current = libcuda.cuCtxSetCurrent


_driver_state: _Driver | None = None
_contexts: dict[int, Any] = {}
"""Each used device's primary context (retained once per process)."""
_unavailable: str | None = None


class _ThreadDevice(threading.local):
    ordinal = -1
    """The device whose context tinyton made current on this thread last (-1: none yet)."""


thread_device = _ThreadDevice()


class _Devices:
    multi = False
    """More than one device's context is in use: torch (the runtime API) switches the current context when it
    works on another device, so tinyton sets its own before each launch instead of trusting `thread_device`."""
    raw: dict[int, ctypes.c_void_p] = {}
    """Each used device's primary context as a ctypes handle (what `cuCtxSetCurrent` takes directly)."""


devices_in_use = _Devices()


def _driver() -> _Driver:
    global _driver_state, _unavailable
    if _driver_state is None:
        if _unavailable is not None:
            raise RuntimeError(f"CUDA is not available: {_unavailable}")
        try:
            _driver_state = _Driver()
        except Exception as e:
            _unavailable = f"{type(e).__name__}: {e}"
            raise
    return _driver_state


def with_context() -> _Driver:
    """The driver, with a device's context current on the calling thread (the device chosen last on this
    thread, else `current_device()`)."""
    state = _driver()
    if thread_device.ordinal < 0:
        use_device(current_device())
    return state


def device_count() -> int:
    """How many GPUs the driver sees (0 without a usable driver)."""
    return _driver().count if is_available() else 0


def use_device(ordinal: int) -> None:
    """Make device `ordinal`'s primary context current on the calling thread (retained on first use)."""
    if thread_device.ordinal == ordinal and not devices_in_use.multi:
        return
    handle = devices_in_use.raw.get(ordinal)
    if handle is None:
        handle = _retain(ordinal)
    err = _driver_state.set_current(handle)  # type: ignore[union-attr]
    if err:
        raise CudaError("cuCtxSetCurrent", err)
    thread_device.ordinal = ordinal


def _retain(ordinal: int) -> ctypes.c_void_p:
    state = _driver()
    if not 0 <= ordinal < state.count:
        raise ValueError(f"no CUDA device {ordinal}: this host has {state.count} (0..{state.count - 1})")
    context = _contexts[ordinal] = call(driver_api().cuDevicePrimaryCtxRetain, state.handles[ordinal])
    handle = devices_in_use.raw[ordinal] = ctypes.c_void_p(int(context))
    devices_in_use.multi = len(_contexts) > 1
    return handle


def active_ordinal() -> int:
    """The device whose context is current on this thread (made current if none is yet)."""
    with_context()
    return thread_device.ordinal


_initialising: threading.Thread | None = None


def start_initialising() -> None:
    """Begin the driver's `cuInit` on a background thread, once per process, so that it overlaps the work of a
    first compile that comes before the compile asks for the device (tracing, fusing, the kernel's code
    generation): on an H100 host `cuInit` took 104-224 ms. ctypes releases the GIL during the call; `_Driver`'s
    own `cuInit` then returns at once (the driver serialises the two). Without a driver library it does
    nothing."""
    global _initialising
    if _initialising is None and _driver_state is None and _unavailable is None:
        _initialising = threading.Thread(target=_init_driver_library, name="tinyton-cuinit", daemon=True)
        _initialising.start()


def _init_driver_library() -> None:
    try:
        ctypes.CDLL("libcuda.so.1").cuInit(0)
    except OSError:
        pass  # no driver: `_Driver` says so, with the reason, when asked


def is_available() -> bool:
    """Whether a CUDA driver and device can be used; never raises (nor makes a context)."""
    try:
        _driver()
    except Exception:
        return False
    return True


@cache
def backend() -> str:
    """`$TINYTON_BACKEND` (cuda, sim or auto), resolved once per process; auto prefers a GPU. Kernels
    launched with `kernel[grid]` and array programs both run where this says."""
    choice = os.environ.get("TINYTON_BACKEND", "auto").strip().lower()
    if choice not in ("cuda", "sim", "auto"):
        raise ValueError(f"TINYTON_BACKEND must be cuda, sim or auto, got {choice!r}")
    if choice == "auto":
        if is_available():
            return "cuda"
        print("tinyton: no GPU found, running on the NumPy simulator", file=sys.stderr)
        return "sim"
    return choice


def unavailable_reason() -> str | None:
    """Why `is_available()` is False (None when it is True)."""
    return None if is_available() else _unavailable


def device(ordinal: int | None = None) -> Device:
    """Properties of device `ordinal` (default: the device current on this thread)."""
    if ordinal is None:
        ordinal = thread_device.ordinal if thread_device.ordinal >= 0 else current_device()
    return _device(ordinal)


@cache
def _device(ordinal: int) -> Device:
    state = _driver()
    if not 0 <= ordinal < state.count:
        raise ValueError(f"no CUDA device {ordinal}: this host has {state.count} (0..{state.count - 1})")
    drv, dev = driver_api(), state.handles[ordinal]
    attr = drv.CUdevice_attribute

    def get(name: str) -> int:
        return call(drv.cuDeviceGetAttribute, getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"), dev)

    return Device(
        ordinal=ordinal,
        name=call(drv.cuDeviceGetName, 256, dev).split(b"\0")[0].decode(),
        compute_capability=(get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")),
        sm_count=get("MULTIPROCESSOR_COUNT"),
        warp_size=get("WARP_SIZE"),
        max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
        max_shared_per_block=get("MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_per_block_optin=get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        total_memory=call(drv.cuDeviceTotalMem, dev),
        max_registers_per_block=get("MAX_REGISTERS_PER_BLOCK"),
        clock_rate_khz=get("CLOCK_RATE"),
        memory_clock_rate_khz=get("MEMORY_CLOCK_RATE"),
        memory_bus_width=get("GLOBAL_MEMORY_BUS_WIDTH"),
    )


@cache
def default_arch() -> str:
    """The `sm_NN` to compile for: device 0's when a GPU is usable, else `sm_90` (one compile serves every
    device of the host's kind)."""
    if is_available():
        major, minor = device(0).compute_capability
        return f"sm_{major}{minor}"
    return "sm_90"


def synchronize(ordinal: int | None = None) -> None:
    """Wait for all work on a device (default: the current device)."""
    use_device(current_device() if ordinal is None else ordinal)
    call(driver_api().cuCtxSynchronize)


def stream_synchronize(handle: int) -> None:
    """Wait for the work queued on the stream with this raw handle (0: the default stream)."""
    drv = driver_api()
    call(drv.cuStreamSynchronize, drv.CUstream(handle))


def stream_capturing(handle: int) -> bool:
    """Whether the stream with this raw handle is being captured into a CUDA graph (`cuStreamIsCapturing`
    through ctypes, as launches: no cuda-python argument conversion)."""
    status = ctypes.c_int()
    err = with_context().is_capturing(ctypes.c_void_p(handle), ctypes.byref(status))  # no `argtypes`: ~15 % cheaper
    if err:
        raise CudaError("cuStreamIsCapturing", err)
    return status.value != 0  # CU_STREAM_CAPTURE_STATUS_NONE


def release(destroy: str, handle: Any) -> None:
    """Destroy a handle from `__del__`, where raising is useless (e.g. at exit)."""
    if handle is not None and _contexts:
        try:
            getattr(driver_api(), destroy)(handle)
        except Exception:
            pass


class Stream:
    """A CUDA stream; `handle` (an int) is what `Launcher.launch` and the copies take."""

    def __init__(self, *, non_blocking: bool = True):
        drv = driver_api()
        use_device(current_device())
        self.ordinal = thread_device.ordinal
        flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else 0
        self._stream = call(drv.cuStreamCreate, flags)
        self.handle = int(self._stream)
        self.raw = self._stream
        """The cuda-python `CUstream` object (what the bindings take)."""

    def synchronize(self) -> None:
        call(driver_api().cuStreamSynchronize, self._stream)

    def __del__(self, _release=release):  # bound now: module globals are gone at interpreter exit
        _release("cuStreamDestroy", getattr(self, "_stream", None))


# Triton's `triton.runtime.driver.active`, as its tutorials use it.

NOMINAL_PROPERTIES = {
    "multiprocessor_count": 132,
    "max_shared_mem": 232448,
    "max_num_regs": 65536,
    "warpSize": 32,
    "sm_clock_rate": 1980000,
    "mem_clock_rate": 2619000,
    "mem_bus_width": 5120,
}
"""What `get_device_properties` reports without a GPU (an H100 SXM's figures), so that occupancy
arithmetic written for a GPU still runs on the simulator."""


@dataclass(frozen=True)
class GPUTarget:
    backend: str
    arch: int
    warp_size: int


class _Utils:
    @staticmethod
    def get_device_properties(index: int = 0) -> dict[str, int]:
        """Triton's property dict of device `index`: SM count, opt-in shared memory per block, registers per
        block, ..."""
        if not is_available():
            return dict(NOMINAL_PROPERTIES)
        d = device(index)
        return {
            "multiprocessor_count": d.sm_count,
            "max_shared_mem": d.max_shared_per_block_optin,
            "max_num_regs": d.max_registers_per_block,
            "warpSize": d.warp_size,
            "sm_clock_rate": d.clock_rate_khz,
            "mem_clock_rate": d.memory_clock_rate_khz,
            "mem_bus_width": d.memory_bus_width,
        }


class ActiveDriver:
    """`tinyton.runtime.driver.active`: the current device (tinyton/runtime/devices.py), its current stream
    and properties, and the torch device that tensors for it live on (the CPU without a GPU, where the
    simulator runs)."""

    utils = _Utils()

    @staticmethod
    def get_current_device() -> int:
        return current_device()

    @staticmethod
    def set_current_device(device: int) -> None:
        """Make `device` current for this thread's later calls (as `torch.cuda.set_device`)."""
        if is_available() and not 0 <= device < device_count():
            raise ValueError(f"no CUDA device {device}: this host has {device_count()}")
        set_device(device)

    @staticmethod
    def get_current_stream(device: int | None = None) -> int:
        """The stream launches go to now: `tt.stream(...)`'s, else torch's current one (of `device`, default
        the current device) when torch has initialised CUDA, else the default stream (0)."""
        explicit = explicit_stream()
        if explicit is not None:
            return explicit
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_initialized():
            return 0
        return torch_stream() if device is None else torch_stream_reader(device)()

    @staticmethod
    def get_active_torch_device() -> Any:
        import torch  # asked for a torch device: the caller uses torch

        return torch.device("cuda", current_device()) if is_available() else torch.device("cpu")

    @staticmethod
    def get_current_target() -> GPUTarget:
        return GPUTarget("cuda", int(default_arch()[3:]), 32)

    @staticmethod
    def is_active() -> bool:
        return True


active = ActiveDriver()
