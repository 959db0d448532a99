"""Where an array program's buffers live, chosen from the kind of its inputs.

- torch CUDA tensors (all on one device): every buffer is a torch tensor on that device, from torch's caching
  allocator; results are torch tensors and launches follow torch's current stream;
- other device arrays only (`DeviceArray`, `__cuda_array_interface__` objects): `DeviceArray`s;
- otherwise (NumPy, CPU torch, a mix): host arrays are copied to the GPU and the results copied back when the
  first input is a host array, or used in place by the simulator when there is no GPU.

The kernels of an array program assume C-contiguous buffers at 16-byte-aligned addresses (`tt.divisibility
= 16` on every pointer). A strided torch input is made contiguous, one at an address that is not a multiple of
16 is copied; other device arrays must be contiguous and are copied when misaligned.

Device memory is described by code snippets (`DeviceMemory`): the compiler generates from them one
straight-line call path per program (tinyton/compiler/launch_plan.py), so a call runs no per-buffer dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from math import prod
from typing import Any

import numpy as np

from tinyton.runtime import arrays, device_memory
from tinyton.runtime.scratch import Scratch
from tinyton.runtime.devices import device_of_call
from tinyton.runtime.streams import explicit_stream, torch_stream_reader
from tinyton.runtime.torch_interop import from_host, host_view, is_torch, torch_dtype

ALIGNMENT = 16
"""Bytes every buffer address of an array program is a multiple of (the kernels' pointer divisibility)."""


@dataclass(frozen=True)
class HostMemory:
    """Buffers handled one by one: the simulator's NumPy arrays, or host inputs staged on the GPU."""

    prepare: Callable[[Any], Any]
    allocate: Callable[[tuple[int, ...], np.dtype], Any]
    finish: Callable[[Any], Any]
    address: Callable[[Any], int] | None = None
    """Device address of a buffer; None when the kernels run on the simulator."""
    host_results: bool = False
    """Results are copied back to the host after the launches (they wait for the stream)."""
    write_back: Callable[[Any, Any], None] = field(default=lambda arg, buffer: None)
    """`write_back(argument, buffer)`: an input the program assigns into, from its buffer back to the caller's
    array (nothing when the buffer is that array)."""
    check_writable: Callable[[Any, int], None] = field(default=lambda arg, index: None)


@dataclass(frozen=True)
class DeviceMemory:
    """Every buffer in device memory, as code snippets for a generated call path.

    `input` binds `{x}` (the buffer) and `{p}` (its address) from the argument `{arg}`; `allocate` is an
    expression of a new buffer of shape `{shape}` (a tuple display; `{dims}`: the same as call arguments) and
    dtype `{dtype}` (a name the namespace binds to `dtype_value(numpy dtype)`), on the device of buffer
    `{like}` (an input); `allocate_same`, where the memory has a cheaper form for it, the same with `{like}`'s
    dtype (measured: docs/benchmarks-history.md, branch `host3`); `address` the address of `{x}`; `stream` binds
    `s`."""

    input: str
    allocate: str
    address: str
    stream: str
    dtype_value: Callable[[np.dtype], Any]
    counter: Callable[[tuple[int, ...]], Any]
    """A zeroed i32 buffer of a shape (grid barriers' counters, made once per stream, not per call)."""
    scratch: Scratch
    """The intermediates' blocks, kept per thread and stream (tinyton/runtime/scratch.py)."""
    allocate_same: str | None = None
    write_back: str = ""
    """Statements copying buffer `{x}` back to the argument `{arg}` it was made from, when it is a copy (an input
    the program assigns into)."""
    namespace: dict[str, Any] = field(default_factory=dict)
    follows_inputs: bool = False
    """Buffers are made on the inputs' device (torch's `new_empty`), not on the current device."""


def memory_key(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """What decides the memory of a call: each input's type and device."""
    return tuple((type(x), getattr(x, "device", None)) for x in inputs)


def memory_on_inputs_device(memory: HostMemory | DeviceMemory) -> bool:
    """Whether `memory` allocates on its inputs' own device (torch's), whatever device is current."""
    return isinstance(memory, DeviceMemory) and memory.follows_inputs


def memory_for(inputs: Sequence[Any], on_gpu: bool) -> HostMemory | DeviceMemory:
    """The memory of a call with these inputs (`on_gpu`: the kernels run on the GPU, else the simulator)."""
    sample = inputs[0] if inputs else None
    torch_input = is_torch(sample)
    if torch_input and sample.is_cuda:
        others = [x for x in inputs if not (is_torch(x) and x.is_cuda and x.device == sample.device)]
        if others:
            raise TypeError(
                f"array program inputs: the first is a torch tensor on {sample.device}, so every input must be one "
                f"(got {', '.join(_describe(x) for x in others)}); move them with .to({str(sample.device)!r})"
            )
        return _torch_memory(sample.device)
    if on_gpu and inputs and all(hasattr(x, "__cuda_array_interface__") for x in inputs):
        return _device_array_memory(device_of_call(inputs, "an array program call"))
    to_caller = from_host if torch_input else _identity
    if not on_gpu:
        return HostMemory(host_array, np.empty, to_caller, write_back=_write_back_host,
                          check_writable=_check_writable)
    host = sample is None or isinstance(sample, np.ndarray) or torch_input

    def prepare(x: Any) -> Any:
        return device_input(x)[0] if hasattr(x, "__cuda_array_interface__") else arrays.to_device(host_array(x))

    finish = (lambda b: to_caller(b.numpy()) if isinstance(b, arrays.DeviceArray) else b) if host else _identity
    return HostMemory(prepare, arrays.empty, finish, lambda b: arrays.as_kernel_argument(b).value, host_results=host,
                      write_back=_write_back_staged, check_writable=_check_writable)


def _check_writable(x: Any, index: int) -> None:
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"the array program assigns into its input {index}, a read-only NumPy array; pass a "
                         "writable one (np.array(x) copies)")


def _host_target(arg: Any) -> np.ndarray:
    """The caller's host array as NumPy sees it (a CPU torch tensor's memory, viewed)."""
    return np.asarray(host_view(arg)) if is_torch(arg) else arg


def _write_back_host(arg: Any, buffer: np.ndarray) -> None:
    target = _host_target(arg)
    if target is not buffer and not (isinstance(target, np.ndarray) and np.may_share_memory(target, buffer)):
        np.copyto(target, buffer)


def _write_back_staged(arg: Any, buffer: Any) -> None:
    """An input staged on the GPU (or a device array copied to align it), back to the caller's array."""
    if buffer is arg:
        return
    if hasattr(arg, "__cuda_array_interface__"):
        _device_write_back(arg, buffer, explicit_stream())
    else:
        np.copyto(_host_target(arg), buffer.numpy())


def _device_write_back(arg: Any, copy: Any, stream: int | None) -> None:
    """A device array's aligned copy (`device_input`), back into the caller's array."""
    if copy is not arg:
        device_memory.memcpy_dtod(arg.__cuda_array_interface__["data"][0], copy.ptr, copy.nbytes, stream)


def _describe(x: Any) -> str:
    device = getattr(x, "device", None)
    return f"{type(x).__name__}" + (f" on {device}" if device is not None else "")


def _identity(x: Any) -> Any:
    return x


def host_array(x: Any) -> np.ndarray:
    """A C-contiguous NumPy array of a host input at an ALIGNMENT-byte address (a CPU torch tensor is viewed,
    not copied; a slice starting mid-row, `x[1:]`, is copied); a 0-d array stays 0-d (np.ascontiguousarray
    would make it 1-d)."""
    array = np.asarray(host_view(x) if is_torch(x) else x, order="C")
    return array if array.ctypes.data % ALIGNMENT == 0 else aligned_copy(array)


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """`array` copied to an ALIGNMENT-byte address (NumPy's allocator promises only the dtype's alignment)."""
    block = np.empty(array.nbytes + ALIGNMENT, np.uint8)
    start = -block.ctypes.data % ALIGNMENT
    copy = block[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


@cache
def _torch_memory(device: Any) -> DeviceMemory:
    import torch  # torch CUDA tensors came in: torch is imported

    def block(nbytes: int, stream: int | None) -> Any:
        """Owned by `stream` (torch frees it in that stream's order), else by torch's current stream."""
        if stream is None:
            return torch.empty(nbytes, dtype=torch.uint8, device=device)
        owner = torch.cuda.ExternalStream(stream, device=device) if stream else torch.cuda.default_stream(device)
        with torch.cuda.stream(owner):
            return torch.empty(nbytes, dtype=torch.uint8, device=device)

    return DeviceMemory(
        input=(
            "{x} = {arg}.contiguous()\n{p} = {x}.data_ptr()\n"
            f"if {{p}} % {ALIGNMENT}:\n    {{x}} = {{x}}.clone()\n    {{p}} = {{x}}.data_ptr()"
        ),
        allocate="{like}.new_empty({dims}, dtype={dtype})",
        allocate_same="{like}.new_empty({dims})",
        address="{x}.data_ptr()",
        stream="s = EXPLICIT()\nif s is None:\n    s = TORCH_STREAM()",
        dtype_value=torch_dtype,
        counter=lambda shape: torch.zeros(shape, dtype=torch.int32, device=device),
        write_back="if {x} is not {arg}:\n    {arg}.copy_({x})",
        scratch=Scratch(block, torch.Tensor.data_ptr),
        namespace={"EXPLICIT": explicit_stream, "TORCH_STREAM": torch_stream_reader(device.index)},
        follows_inputs=True,
    )


@cache
def _device_array_memory(ordinal: int) -> DeviceMemory:
    """Device arrays of device `ordinal` (its own scratch blocks: stream 0 means each device's default
    stream)."""
    return DeviceMemory(
        input="{x}, {p} = DEVICE_INPUT({arg})",
        allocate="EMPTY({shape}, {dtype})",
        address="{x}.ptr",
        stream="s = EXPLICIT()\nif s is None:\n    s = 0",
        dtype_value=np.dtype,
        counter=lambda shape: arrays.zeros(shape, np.int32),
        scratch=Scratch(lambda nbytes, stream: arrays.empty((nbytes,), np.uint8), lambda block: block.ptr),
        write_back="WRITE_BACK({arg}, {x}, s)",
        namespace={"EMPTY": arrays.empty, "EXPLICIT": explicit_stream, "DEVICE_INPUT": device_input,
                   "WRITE_BACK": _device_write_back},
    )


def device_input(x: Any) -> tuple[Any, int]:
    """A device array as an array-program buffer: itself and its address, or an aligned copy of it; a
    strided one is refused (there is no generic device copy that follows strides)."""
    if type(x) is arrays.DeviceArray:
        return x, x.ptr  # its own allocation: contiguous and aligned
    interface = x.__cuda_array_interface__
    shape, dtype = tuple(interface["shape"]), np.dtype(interface["typestr"])
    strides = interface.get("strides")
    if strides is not None and tuple(strides) != arrays.c_strides(shape, dtype.itemsize) and prod(shape) > 1:
        raise ValueError(
            f"array program input of type {type(x).__name__} has strides {tuple(strides)}: array programs take "
            "contiguous device arrays (make a contiguous copy first)"
        )
    address = interface["data"][0]
    if address % ALIGNMENT == 0:
        return x, address
    copy = arrays.empty(shape, dtype)
    device_memory.memcpy_dtod(copy.ptr, address, copy.nbytes, explicit_stream())
    return copy, copy.ptr
