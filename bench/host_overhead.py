"""Host time of launches and array-program calls (issue 10 point 5), without the GPU clouding it.

On a GPU host: µs of host time per call, measured in bursts short enough not to fill the launch queue
(`enqueue_us`: 128 calls, synchronize, repeat; median), next to raw cuLaunchKernel on the same host in the
same run, for the cached `kernel[grid]`, an array-program call with one launch (softmax 32x2048) and with
two (softmax then a column sum), torch.add(out=) and Triton's launch; then back-to-back calls (host and
GPU together) and the array programs' GPU time.

Without a GPU (`--standin`, or automatically): the same Python paths on a stand-in GPU
(tests/standin_gpu.py: libc's labs in place of cuLaunchKernel, CPU torch tensors as device memory), ns per
stage of everything above the cuLaunchKernel call.

    python bench/host_overhead.py [--standin]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import tinyton as tt
from tinyton.runtime import driver
from tinyton.runtime.streams import current_stream

SHAPE = (32, 2048)


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def softmax_colsum(x):
    """Two launches: the softmax, then a column sum of it (an intermediate between them)."""
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)).sum(axis=0)


@tt.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


def enqueue_us(fn: Callable[[], object], burst: int = 128, repeats: int = 41) -> float:
    """Median host µs per call over bursts of `burst` calls, each burst started on an idle GPU."""
    fn()
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(burst):
            fn()
        samples.append((time.perf_counter() - start) / burst * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def back_to_back_us(fn: Callable[[], object], calls: int = 5000, rounds: int = 5) -> float:
    """Median µs per call of `calls` calls and one synchronize (host or GPU, whichever is slower)."""
    samples = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def ns(fn: Callable[[], object], number: int = 20_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e9


def gpu_rows() -> list[list[object]]:
    """[what, host µs (bursts), back-to-back µs] per path, measured on the GPU."""
    from cuda.bindings import driver as cu

    x = torch.randn(*SHAPE, device="cuda")
    a, b, c = (torch.randn(1024, device="cuda") for _ in range(3))
    add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    torch.testing.assert_close(c, a + b)
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1))
    torch.testing.assert_close(softmax_colsum(x), torch.softmax(x, -1).sum(0), rtol=1e-4, atol=1e-4)
    compiled = add_kernel.compile(a, b, c, 1024, BLOCK=1024)
    module = cu.cuModuleLoadData(compiled.asm["ptx"].encode() + b"\0")[1]
    function = cu.cuModuleGetFunction(module, compiled.name.encode())[1]
    slots = [np.array([t.data_ptr()], np.uint64) for t in (a, b, c)] + [np.array([1024], np.int32)]
    params = np.array([s.ctypes.data for s in slots], np.uint64)
    threads = compiled.num_warps * 32
    launcher = compiled.launcher
    values = (a.data_ptr(), b.data_ptr(), c.data_ptr(), 1024)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("raw cuLaunchKernel (cuda-python, prebuilt params)",
         lambda: cu.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, 0, params.ctypes.data, 0)),
        ("tinyton driver Launcher.launch (4 values)", lambda: launcher.launch((1, 1, 1), threads, 0, 0, values)),
        ("tinyton add_kernel[(1,)](a, b, c, n, BLOCK=1024), cached", lambda: add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)),
        ("tinyton softmax(x) 32x2048 (1 launch)", lambda: softmax(x)),
        ("tinyton softmax_colsum(x) 32x2048 (2 launches)", lambda: softmax_colsum(x)),
        ("torch.add(a, b, out=c)", lambda: torch.add(a, b, out=c)),
        ("torch.softmax(x, -1)", lambda: torch.softmax(x, -1)),
    ]
    try:
        import triton_reference  # bench/: Triton's add kernel, when Triton is installed

        cases.append(("Triton add[grid](...)", lambda: triton_reference.add(a, b, c)))
    except ImportError:
        pass
    rows = [[name, enqueue_us(fn), back_to_back_us(fn)] for name, fn in cases]
    for name, fn in [("softmax", lambda: softmax(x)), ("softmax_colsum", lambda: softmax_colsum(x))]:
        rows.append([f"GPU time of {name}(x) (do_bench, µs)", tt.testing.do_bench(fn) * 1e3, ""])
    return rows


def standin_rows() -> list[list[object]]:
    """[what, ns] per stage of the Python paths, on the stand-in GPU."""
    from standin_gpu import NO_LAUNCH, device_array, standin_gpu

    rows: list[list[object]] = []
    with standin_gpu(softmax, softmax_colsum, add_kernel):
        x = torch.randn(*SHAPE)  # stands for a CUDA tensor
        softmax(x), softmax_colsum(x)
        for name, fn in [("softmax", softmax), ("softmax_colsum", softmax_colsum)]:
            key_of, entries = fn._calls._last
            program = fn.compile(x)
            key = key_of((x,))
            guard, run = entries[key]
            rows += [
                [f"{name}(x): the whole call ({program.num_launches} launch(es))", ns(lambda fn=fn: fn(x))],
                ["  key function (argument types, shape, dtype, device)", ns(lambda key_of=key_of: key_of((x,)))],
                ["  key lookup", ns(lambda entries=entries, key=key: entries[key])],
                ["  globals guard", ns(guard)],
                ["  runner (inputs, allocations, stream, launches)", ns(lambda run=run: run((x,)))],
            ]
        rows += [
            ["torch.empty((32, 2048), float32) (CPU allocator here)", ns(lambda: torch.empty(SHAPE, dtype=torch.float32))],
            ["x.contiguous() + x.data_ptr()", ns(lambda: x.contiguous().data_ptr())],
            ["stream: explicit, else the default (torch's current stream: on a GPU)", ns(lambda: current_stream())],
        ]
        a, b, c = (device_array((1024,), ptr=(1 + i) << 32) for i in range(3))
        add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
        launch = add_kernel[(1,)]
        kernel = add_kernel.compile(a, b, c, 1024, BLOCK=1024)
        launcher = kernel.launcher
        values = (a.ptr, b.ptr, c.ptr, 1024)
        classify = next(iter(add_kernel._call_shapes.values())).classify
        ta, tb, tc = (torch.empty(1024) for _ in range(3))
        torch_classify = _torch_classifier(ta, tb, tc)
        rows += [
            ["add_kernel[(1,)](a, b, c, n, BLOCK=1024), DeviceArrays", ns(lambda: launch(a, b, c, 1024, BLOCK=1024))],
            ["  add_kernel[(1,)] (bound launcher lookup)", ns(lambda: add_kernel[(1,)])],
            ["  classify (key + parameter values)", ns(lambda: classify((a, b, c, 1024), {"BLOCK": 1024}))],
            ["  the same for torch tensors", ns(lambda: torch_classify((ta, tb, tc, 1024), {"BLOCK": 1024}))],
            ["  Launcher.launch (parameter record + the C call)", ns(lambda: launcher.launch((1, 1, 1), 128, 0, 0, values))],
            ["  the C call alone (labs, cuLaunchKernel's 11 arguments)",
             ns(lambda: NO_LAUNCH(None, 1, 1, 1, 128, 1, 1, 0, None, None, None))],
        ]
    return rows


def _torch_classifier(*tensors: torch.Tensor) -> Callable[..., object]:
    from tinyton.frontend.arguments import classifier
    from tinyton.frontend.options import LAUNCH_OPTIONS

    return classifier(add_kernel.params, [*map(type, tensors), int], {"BLOCK": int}, LAUNCH_OPTIONS).classify


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standin", action="store_true", help="the stand-in GPU even where there is one")
    args = parser.parse_args()
    if args.standin or not driver.is_available():
        print("stand-in GPU (no cuLaunchKernel): ns per call\n\n| what | ns |\n|---|---|")
        for what, value in standin_rows():
            print(f"| {what} | {value:.0f} |")
        return
    print(f"device: {driver.device().name}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n")
    print("| what | host µs per call (bursts of 128) | µs per call back-to-back |\n|---|---|---|")
    for what, burst, b2b in gpu_rows():
        print(f"| {what} | {burst:.2f} | {b2b if isinstance(b2b, str) else f'{b2b:.2f}'} |")


if __name__ == "__main__":
    main()
