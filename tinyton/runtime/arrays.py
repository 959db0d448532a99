"""
Device arrays, and the classification of kernel arguments on the launch path.

`DeviceArray` is tinyton's own contiguous device buffer. `as_kernel_argument` turns any
supported launch argument into a `KernelArgument`: the value to put in the kernel's
parameter slot, and the numpy dtype that the compiler specializes on. Device data
(DeviceArray, torch CUDA tensors, `__cuda_array_interface__` and DLPack producers) is
passed without a copy (the pointer is their data address, strides or not, as in Triton); a host array is
staged as the memory span from its first element to its last (tinyton/runtime/spans.py), so a view
passed with its strides means what it means on the simulator, and that span is copied back.
Classification dispatches on the argument's type, with one cached classifier per type.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import numpy.typing as npt

from tinyton.dtypes import BF16
from tinyton.runtime import device_memory, driver
from tinyton.runtime.devices import current_device, index_of, running_on
from tinyton.runtime.spans import memory_span
from tinyton.runtime.torch_interop import host_view, numpy_dtype

_KEEPERS: list[list[DeviceArray]] = []
"""Lists that every new DeviceArray is appended to (graph captures keep their memory alive this way)."""


@contextmanager
def keep_allocations(into: list[DeviceArray]) -> Iterator[None]:
    """Append every DeviceArray allocated inside the block to `into`."""
    _KEEPERS.append(into)
    try:
        yield
    finally:
        _KEEPERS.remove(into)


class DeviceArray:
    """A C-contiguous array in device memory, freed when the object goes away. It lives on the device
    current when it was made (`tt.device(n)`, else torch's current device, else 0): `device` says which."""

    __slots__ = ("ptr", "shape", "dtype", "nbytes", "device_ordinal", "_argument")

    def __init__(self, shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float32):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = prod(self.shape) * self.dtype.itemsize
        self.device_ordinal = current_device()
        self.ptr = device_memory.alloc(self.nbytes)
        self._argument = KernelArgument(self.ptr, self.dtype, True)
        for keeper in _KEEPERS:
            keeper.append(self)

    @property
    def device(self) -> str:
        """`"cuda:N"`, as torch names devices."""
        return f"cuda:{self.device_ordinal}"

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides of the C-contiguous layout, as numpy reports them."""
        return c_strides(self.shape, self.dtype.itemsize)

    def copy_from_host(self, src: np.ndarray, stream: int | None = None) -> None:
        self._check_host(src)
        driver.use_device(self.device_ordinal)
        device_memory.memcpy_htod(self.ptr, np.ascontiguousarray(src), stream)

    def to_host(self, out: np.ndarray, stream: int | None = None) -> np.ndarray:
        """Copy into the existing C-contiguous host array `out` and return it."""
        self._check_host(out)
        driver.use_device(self.device_ordinal)
        device_memory.memcpy_dtoh(out, self.ptr, stream)
        return out

    def numpy(self, stream: int | None = None) -> np.ndarray:
        """A new host copy."""
        return self.to_host(np.empty(self.shape, self.dtype), stream)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "strides": None,
            "version": 3,
        }

    def _check_host(self, array: np.ndarray) -> None:
        if array.shape != self.shape or array.dtype != self.dtype:
            raise ValueError(
                f"host array {array.shape} {array.dtype} does not match "
                f"device array {self.shape} {self.dtype}"
            )

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device!r}, ptr={self.ptr:#x})"

    def __del__(self):
        ptr = getattr(self, "ptr", None)
        if ptr is not None:
            try:
                device_memory.free(ptr)
            except Exception:
                pass  # interpreter exit or a context already torn down


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array of this shape."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def empty(shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float32) -> DeviceArray:
    return DeviceArray(shape, dtype)


def zeros(shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float32) -> DeviceArray:
    array = DeviceArray(shape, dtype)
    device_memory.memset(array.ptr, 0, array.nbytes)
    return array


def to_device(array: npt.ArrayLike, stream: int | None = None, device: Any = None) -> DeviceArray:
    """A device copy of a host array, on `device` (an index or `"cuda:N"`; default: the current device)."""
    host = np.asarray(array)
    if device is not None:
        with running_on(index_of(device)):
            return to_device(host, stream)
    result = DeviceArray(host.shape, host.dtype)
    result.copy_from_host(host, stream)
    return result


@dataclass(slots=True)
class KernelArgument:
    """
    One launch argument, ready for a parameter slot.

    `value` is the device address (`is_pointer`) or the scalar; `dtype` is the element
    dtype of arrays and the dtype of scalars. For a host array, `host` is its memory span
    array and `staging` its device copy: call `copy_back()` after the launch when the
    kernel writes that parameter. Shared instances (a DeviceArray's) must not be mutated.
    """

    value: int | float | bool
    dtype: np.dtype
    is_pointer: bool
    host: np.ndarray | None = None
    staging: DeviceArray | None = None

    def copy_back(self, stream: int | None = None) -> None:
        if self.host is None or self.staging is None:
            return
        if not self.host.flags.writeable:
            raise ValueError("a read-only array cannot be copied back into")
        self.staging.to_host(self.host, stream)


_Classifier = Callable[[Any], KernelArgument]
_CLASSIFIERS: dict[type, _Classifier] = {}


def as_kernel_argument(obj: Any) -> KernelArgument:
    """Classify a launch argument; raises TypeError for unsupported ones."""
    classify = _CLASSIFIERS.get(type(obj))
    if classify is None:
        classify = _CLASSIFIERS[type(obj)] = _classifier_for(type(obj))
    return classify(obj)


_INT_RANGES = [
    (np.dtype(t), int(np.iinfo(t).min), int(np.iinfo(t).max))
    for t in (np.int32, np.int64, np.uint64)
]
_FLOAT32, _BOOL = np.dtype(np.float32), np.dtype(np.bool_)


def _int_argument(value: int) -> KernelArgument:
    """Python ints are i32 when they fit, else i64 (else u64), like Triton."""
    for dtype, low, high in _INT_RANGES:
        if low <= value <= high:
            return KernelArgument(value, dtype, False)
    raise OverflowError(f"integer argument {value} does not fit in 64 bits")


def _host_argument(array: np.ndarray) -> KernelArgument:
    span = memory_span(array)  # contiguous: the staging copy is one memcpy each way
    staging = to_device(span)
    return KernelArgument(staging.ptr, array.dtype, True, span, staging)


def _cuda_array_interface_argument(obj: Any) -> KernelArgument:
    cai = obj.__cuda_array_interface__
    return KernelArgument(cai["data"][0], np.dtype(cai["typestr"]), True)


_TORCH_DTYPES: dict[Any, np.dtype] = {}


def _torch_argument(tensor: Any) -> KernelArgument:
    if not tensor.is_cuda:
        return _host_argument(host_view(tensor))
    dtype = _TORCH_DTYPES.get(tensor.dtype)
    if dtype is None:
        try:
            dtype = numpy_dtype(tensor.dtype)
        except TypeError:
            raise TypeError(f"unsupported tensor dtype {tensor.dtype}") from None
        _TORCH_DTYPES[tensor.dtype] = dtype
    return KernelArgument(tensor.data_ptr(), dtype, True)


class _DLTensor(ctypes.Structure):
    """The head of DLPack's (unversioned) `DLManagedTensor`."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    ]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}
_DL_BFLOAT = 4
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_argument(obj: Any) -> KernelArgument:
    device_type, _ = obj.__dlpack_device__()
    if device_type in (_DL_CPU, _DL_CUDA_HOST):
        return _host_argument(np.from_dlpack(obj))
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise TypeError(f"DLPack device type {device_type} is not a CUDA device")
    # Not consuming the capsule: its destructor releases the producer's reference,
    # while the caller's `obj` keeps the memory alive.
    capsule = obj.__dlpack__()
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    bf16 = tensor.code == _DL_BFLOAT and tensor.bits == 16
    if (tensor.code not in _DL_KINDS and not bf16) or tensor.lanes != 1:
        raise TypeError(f"unsupported DLPack dtype code={tensor.code} lanes={tensor.lanes}")
    dtype = BF16 if bf16 else np.dtype(f"{_DL_KINDS[tensor.code]}{tensor.bits // 8}")
    return KernelArgument((tensor.data or 0) + tensor.byte_offset, dtype, True)


def _classifier_for(cls: type) -> _Classifier:
    if issubclass(cls, DeviceArray):
        return lambda a: a._argument
    if cls is bool or cls is np.bool_:
        return lambda v: KernelArgument(bool(v), _BOOL, False)
    if cls is int:
        return _int_argument
    if cls is float:
        return lambda v: KernelArgument(v, _FLOAT32, False)
    if issubclass(cls, np.generic):
        dtype = np.dtype(cls)
        return lambda v: KernelArgument(v.item(), dtype, False)
    if issubclass(cls, np.ndarray):
        return _host_argument
    if cls.__module__.partition(".")[0] == "torch" and hasattr(cls, "data_ptr"):
        return _torch_argument
    if hasattr(cls, "__cuda_array_interface__"):
        return _cuda_array_interface_argument
    if hasattr(cls, "__dlpack__") and hasattr(cls, "__dlpack_device__"):
        return _dlpack_argument
    raise TypeError(f"unsupported kernel argument type {cls.__qualname__}")
