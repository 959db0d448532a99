"""
Host-side launch overhead: N back-to-back launches of a cached tiny kernel, one sync.

Compares cuda-python's `cuLaunchKernel` with a prebuilt argument buffer (the anchor),
the same call through ctypes, and `tinyton.runtime.launch.Launcher`; then the ways of
writing parameter slots and the classification of arguments (host CPU only).
Usage: python bench/probes/launch_overhead.py [N]
"""

from __future__ import annotations

import ctypes
import statistics
import struct
import sys
import time
import timeit
from collections.abc import Callable

import numpy as np

sys.path.insert(0, "tests")
from llvm_kernels import vector_add  # noqa: E402

from tinyton.lowering.ptx import compile_llvm_module  # noqa: E402
from tinyton.runtime import driver  # noqa: E402
from tinyton.runtime.arrays import as_kernel_argument, empty  # noqa: E402
from tinyton.runtime.launch import Launcher, Module  # noqa: E402


def per_launch_us(launch: Callable[[], None], n: int, repeats: int = 7) -> float:
    """Median over `repeats` of (n launches + one synchronize) / n."""
    launch()
    driver.synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            launch()
        driver.synchronize()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


def enqueue_us(launch: Callable[[], None], n: int = 256, repeats: int = 21) -> float:
    """Host time per launch for a burst short enough not to fill the launch queue."""
    samples = []
    for _ in range(repeats):
        driver.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            launch()
        samples.append((time.perf_counter() - start) / n * 1e6)
    driver.synchronize()
    return statistics.median(samples)


def per_call_ns(fn: Callable[[], object], number: int = 200_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9


def main(n: int) -> None:
    drv = driver.driver_api()
    module = Module.from_ptx(compile_llvm_module(vector_add(), arch=driver.default_arch())["ptx"])
    fn = module.function("vadd4")
    a, b, c = empty(512), empty(512), empty(512)
    values = (a.ptr, b.ptr, c.ptr, 512)

    slots = [np.array([v], dtype) for v, dtype in zip(values, ("u8", "u8", "u8", "i4"))]
    params = np.array([s.ctypes.data for s in slots], np.uint64)
    addr = params.ctypes.data
    raw = drv.cuLaunchKernel
    lib = ctypes.CDLL("libcuda.so.1").cuLaunchKernel  # without `argtypes`, as Launcher calls the driver
    launcher = Launcher(fn, (driver.POINTER, driver.POINTER, driver.POINTER, "i4"))

    def cuda_python() -> None:
        (err,) = raw(fn.handle, 1, 1, 1, 128, 1, 1, 0, 0, addr, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise driver.CudaError("cuLaunchKernel", err)

    lib_typed = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    lib_typed.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, *[ctypes.c_void_p] * 3]
    func_c, addr_c = ctypes.c_void_p(fn.address), ctypes.c_void_p(addr)

    def ctypes_argtypes() -> None:
        if lib_typed(fn.address, 1, 1, 1, 128, 1, 1, 0, 0, addr, None):
            raise RuntimeError("launch failed")

    def ctypes_raw() -> None:
        if lib(func_c, 1, 1, 1, 128, 1, 1, 0, None, addr_c, None):
            raise RuntimeError("launch failed")

    def tinyton() -> None:
        launcher.launch((1, 1, 1), 128, 0, 0, values)

    def round_trip() -> None:
        launcher.launch((1, 1, 1), 128, 0, 0, values)
        driver.synchronize()

    print(f"device: {driver.device().name}, N={n}")
    print(f"| launch path | µs per launch, {n} launches + sync | µs host enqueue, bursts of 256 |")
    print("|---|---|---|")
    for name, launch in [
        ("cuda-python cuLaunchKernel, prebuilt args (anchor)", cuda_python),
        ("ctypes cuLaunchKernel with argtypes, prebuilt args", ctypes_argtypes),
        ("ctypes cuLaunchKernel, no argtypes, prebuilt args", ctypes_raw),
        ("tinyton Launcher.launch (writes 4 values)", tinyton),
    ]:
        print(f"| {name} | {per_launch_us(launch, n):.2f} | {enqueue_us(launch):.2f} |")
    print(
        f"| Launcher.launch + synchronize round trip | {per_launch_us(round_trip, n // 10):.2f} | |"
    )

    class Params(ctypes.Structure):
        _fields_ = [
            ("a", ctypes.c_uint64),
            ("b", ctypes.c_uint64),
            ("c", ctypes.c_uint64),
            ("n", ctypes.c_int32),
        ]

    record = np.zeros(1, np.dtype([("a", "u8"), ("b", "u8"), ("c", "u8"), ("n", "i4")], align=True))
    params_struct, packer = Params(), struct.Struct("=QQQi")
    buffer = (ctypes.c_char * packer.size)()

    def ctypes_fields() -> None:
        p = params_struct
        p.a, p.b, p.c, p.n = values

    def numpy_slots() -> None:
        for slot, value in zip(slots, values):
            slot[0] = value

    print("\n| writing 4 parameter slots | ns |\n|---|---|")
    for name, write in [
        ("numpy record `rec[0] = values` (Launcher)", lambda: record.__setitem__(0, values)),
        ("ctypes Structure, unrolled field stores", ctypes_fields),
        ("numpy per-slot item assignment", numpy_slots),
        ("struct.pack_into", lambda: packer.pack_into(buffer, 0, *values)),
    ]:
        print(f"| {name} | {per_call_ns(write):.0f} |")

    print("\n| as_kernel_argument | ns |\n|---|---|")
    for name, value in [
        ("DeviceArray", a),
        ("int", 512),
        ("float", 0.5),
        ("np.float32", np.float32(1)),
    ]:
        print(f"| {name} | {per_call_ns(lambda value=value: as_kernel_argument(value)):.0f} |")
    try:
        import torch

        t = torch.empty(16, device="cuda")
        print(f"| torch CUDA tensor | {per_call_ns(lambda: as_kernel_argument(t), 50_000):.0f} |")
    except ImportError:
        pass


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
