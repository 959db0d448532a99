"""Device memory through the driver: allocations on the current device, page-locked host buffers, copies and
memsets. Device pointers are plain ints; host buffers are C-contiguous NumPy arrays. A copy or memset given a
stream (a raw handle, 0 the default stream) is queued on it, else it completes before the call returns."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from tinyton.runtime import driver
from tinyton.runtime.devices import current_device


def alloc(nbytes: int) -> int:
    """Device memory on the current device (`current_device()`)."""
    driver.use_device(current_device())
    return int(driver.call(driver.driver_api().cuMemAlloc, max(nbytes, 1)))


def pinned(count: int, dtype: npt.DTypeLike) -> np.ndarray:
    """`count` elements of page-locked host memory as a NumPy array, which asynchronous copies (and CUDA-graph
    copy nodes) may read at any later time; kept for the life of the process."""
    driver.use_device(current_device())
    nbytes = count * np.dtype(dtype).itemsize
    address = int(driver.call(driver.driver_api().cuMemAllocHost, nbytes))
    return np.frombuffer((ctypes.c_byte * nbytes).from_address(address), dtype=dtype, count=count)


def free(ptr: int) -> None:
    driver.call(driver.driver_api().cuMemFree, ptr)


def memcpy_htod(dst: int, src: np.ndarray, stream: int | None = None) -> None:
    drv = driver.driver_api()
    _call_on(stream, drv.cuMemcpyHtoD, drv.cuMemcpyHtoDAsync, dst, _host_address(src), src.nbytes)


def memcpy_dtoh(dst: np.ndarray, src: int, stream: int | None = None) -> None:
    drv = driver.driver_api()
    _call_on(stream, drv.cuMemcpyDtoH, drv.cuMemcpyDtoHAsync, _host_address(dst), src, dst.nbytes)


def memcpy_dtod(dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
    drv = driver.driver_api()
    _call_on(stream, drv.cuMemcpyDtoD, drv.cuMemcpyDtoDAsync, dst, src, nbytes)


def memset(ptr: int, byte: int, nbytes: int, stream: int | None = None) -> None:
    drv = driver.driver_api()
    _call_on(stream, drv.cuMemsetD8, drv.cuMemsetD8Async, ptr, byte, nbytes)


def _call_on(
    stream: int | None, sync: Callable[..., tuple[Any, ...]], on_stream: Callable[..., tuple[Any, ...]], *args: Any
) -> None:
    """`sync(*args)` without a stream, else its `...Async` variant `on_stream(*args, stream)`."""
    if stream is None:
        driver.call(sync, *args)
    else:
        driver.call(on_stream, *args, stream)


def _host_address(array: np.ndarray) -> int:
    if not array.flags.c_contiguous:
        raise ValueError("host buffers must be C-contiguous")
    return array.ctypes.data
