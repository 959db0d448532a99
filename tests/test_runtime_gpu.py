"""The runtime on a real GPU: kernels from `llvm_kernels`, compiled by the default toolchain."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from llvm_kernels import row_sum, vector_add

from tinyton.lowering.ptx import compile_llvm_module
from tinyton.runtime import device_memory, driver
from tinyton.runtime.launch import Launcher, Module
from tinyton.runtime.arrays import as_kernel_argument, empty, to_device, zeros

pytestmark = pytest.mark.gpu
VADD_PARAMS = (driver.POINTER, driver.POINTER, driver.POINTER, "i4")


@cache
def vadd_module() -> Module:
    return Module.from_ptx(compile_llvm_module(vector_add(), arch=driver.default_arch())["ptx"])


def vadd(n: int) -> tuple[Launcher, tuple[int, int, int]]:
    launcher = Launcher(vadd_module().function("vadd4"), VADD_PARAMS)
    return launcher, (-(-n // 512), 1, 1)


def test_device_properties():
    dev = driver.device()
    assert dev.compute_capability >= (7, 0) and dev.sm_count > 0 and dev.warp_size == 32
    assert dev.max_shared_per_block_optin >= dev.max_shared_per_block >= 48 * 1024
    assert driver.default_arch() == "sm_{}{}".format(*dev.compute_capability)


def test_vector_add():
    n = 1000  # not a multiple of the 512 elements per block: the tail is predicated off
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    da, db, dc = to_device(a), to_device(b), to_device(np.full(n, np.nan, np.float32))
    launcher, grid = vadd(n)
    launcher.launch(grid, 128, 0, 0, (da.ptr, db.ptr, dc.ptr, n))
    driver.synchronize()
    np.testing.assert_array_equal(dc.numpy(), a + b)


def test_row_sum_shuffles_and_shared_memory():
    rows, n = 64, 1000
    x = np.random.default_rng(1).standard_normal((rows, n), dtype=np.float32)
    module = Module.from_ptx(compile_llvm_module(row_sum(), arch=driver.default_arch())["ptx"])
    launcher = Launcher(module.function("row_sum"), (driver.POINTER, driver.POINTER, "i4"))
    dx, out = to_device(x), empty(rows)
    launcher.launch((rows, 1, 1), 128, 0, 0, (dx.ptr, out.ptr, n))
    driver.synchronize()
    np.testing.assert_allclose(out.numpy(), x.sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-4)


def test_numpy_arguments_are_staged_and_copied_back():
    n = 4096
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    c = np.zeros(n, np.float32)
    args = [as_kernel_argument(v) for v in (a, b, c, n)]
    assert [arg.dtype for arg in args] == [np.float32, np.float32, np.float32, np.int32]
    launcher, grid = vadd(n)
    launcher.launch(grid, 128, 0, 0, tuple(arg.value for arg in args))
    args[2].copy_back()
    np.testing.assert_array_equal(c, a + b)


def test_device_array_round_trip_and_interfaces():
    host = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    dev = to_device(host)
    assert (dev.shape, dev.dtype, dev.strides) == (host.shape, host.dtype, host.strides)
    np.testing.assert_array_equal(dev.numpy(), host)
    cai = dev.__cuda_array_interface__
    assert cai["data"] == (dev.ptr, False) and cai["typestr"] == "<i8" and cai["version"] == 3
    arg = as_kernel_argument(dev)
    assert (arg.value, arg.dtype, arg.is_pointer) == (dev.ptr, host.dtype, True)

    class Foreign:  # any `__cuda_array_interface__` producer
        __cuda_array_interface__ = cai

    assert as_kernel_argument(Foreign()).value == dev.ptr
    np.testing.assert_array_equal(zeros(5, np.int32).numpy(), np.zeros(5, np.int32))


def test_stream_copies_and_launch():
    stream = driver.Stream()
    n = 2048
    a = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    da, dc = empty(n), empty(n)
    da.copy_from_host(a, stream.handle)
    launcher, grid = vadd(n)
    launcher.launch(grid, 128, 0, stream.handle, (da.ptr, da.ptr, dc.ptr, n))
    copy = empty(n)
    device_memory.memcpy_dtod(copy.ptr, dc.ptr, dc.nbytes, stream.handle)
    out = np.empty(n, np.float32)
    copy.to_host(out, stream.handle)
    stream.synchronize()
    np.testing.assert_array_equal(out, 2 * a)


def test_torch_and_dlpack_without_copy():
    torch = pytest.importorskip("torch")
    t = torch.arange(16, dtype=torch.float32, device="cuda")
    arg = as_kernel_argument(t)
    assert (arg.value, arg.dtype, arg.is_pointer) == (t.data_ptr(), np.float32, True)

    class DLPackOnly:
        def __dlpack__(self, **kwargs):
            return t[4:].__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    arg = as_kernel_argument(DLPackOnly())
    assert (arg.value, arg.dtype) == (t.data_ptr() + 16, np.float32)


def test_large_dynamic_shared_memory_opt_in():
    fn = vadd_module().function("vadd4", dynamic_shared_bytes=100 * 1024)
    launcher = Launcher(fn, VADD_PARAMS)
    d = zeros(512)
    launcher.launch((1, 1, 1), 128, 100 * 1024, 0, (d.ptr, d.ptr, d.ptr, 512))
    driver.synchronize()


def test_bad_launch_raises_cuda_error():
    launcher, _ = vadd(512)
    with pytest.raises(
        driver.CudaError, match="cuLaunchKernelEx failed: CUDA_ERROR_INVALID_VALUE"
    ) as info:
        launcher.launch((1, 1, 1), 4096, 0, 0, (0, 0, 0, 0))  # > 1024 threads per block
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    with pytest.raises(driver.CudaError, match="cuMemAlloc"):
        device_memory.alloc(1 << 60)
