"""Host time of launches and array-program calls (issue 10 point 5), measured steadily on noisy hosts.

Every case is measured in many rounds, the cases taking turns within each round (a slow spell of the host
falls on all of them alike); each figure is the median over the rounds, with its spread (the rounds' least and
largest value). On a GPU host, per case:

- host µs per call in bursts (`BURST` calls, synchronize, repeat): calls short enough not to fill the launch
  queue, so the host's own time;
- µs per call back-to-back (`CALLS` calls, then one synchronize): host or GPU, whichever is slower.

Next to tinyton's figures, what the host allows, measured in the same process: the raw driver launch of the
same kernel three ways (cuda-python's `cuLaunchKernel`, ctypes `cuLaunchKernel` with its eleven arguments,
ctypes `cuLaunchKernelEx` with a prebuilt configuration: what tinyton's bound launch calls), an empty kernel
launched by tinyton and by Triton, and torch's launch of a one-element `x.add_(1)`.

The summary, with the issue's goals:

- **array call host time above GPU time** = µs per back-to-back call minus the program's GPU time (do_bench
  median), per round: what a stream of calls costs beyond the work itself (softmax 32x2048, one launch; and
  softmax then a column sum, two launches);
- **array call host time above tinyton's bound launch** = host µs per call (bursts) minus the bound driver
  launch of the same round (times the program's launches): what an array call adds above its driver calls,
  whatever the GPU time;
- **kernel[grid]** = host µs per cached `add_kernel[(1,)](a, b, c, n, BLOCK=1024)` with torch tensors, bursts;
- **kernel[grid] above tinyton's bound launch / above cuda-python's cuLaunchKernel** = the same minus the
  driver call of the same kernel and values, per round: what tinyton adds above the driver.

Also, host only (ns): the stages of the two calls (key function, globals guard, classification), the ways to
read the stream, to allocate a CUDA tensor, the torch accessors a launch reads, the stream-capture check of
calls on side streams. Without a GPU (`--standin`, or automatically): the same Python paths on a stand-in GPU
(tests/standin_gpu.py: libc's strnlen in place of cuLaunchKernelEx, CPU torch tensors as device memory), ns
per stage of everything above the driver call.

    python bench/host_overhead.py [--standin] [--rounds N]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import tinyton as tt
from tinyton.runtime import driver
from tinyton.runtime.launch import LaunchConfig
from tinyton.runtime.streams import current_stream, explicit_stream, torch_stream_reader

SHAPE = (32, 2048)
BURST, CALLS = 128, 2000
SOFTMAX_COLSUM = "tinyton softmax_colsum(x) 32x2048 (2 launches)"
SOFTMAX = "tinyton softmax(x) 32x2048 (1 launch)"
GRID_LAUNCH = "tinyton add_kernel[(1,)](a, b, c, n, BLOCK=1024), cached"
BOUND_LAUNCH = "tinyton bound launch (Launcher.bind: parameter record + cuLaunchKernelEx)"
RAW_EX = "driver: ctypes cuLaunchKernelEx (prebuilt config and params)"
CUDA_PYTHON = "driver: cuda-python cuLaunchKernel (prebuilt params)"


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


Case = tuple[str, Callable[[], object]]


DEFAULT_ROUNDS = 41
"""Rounds per case: the cases take turns, so a slow spell of the host hits them alike."""


def burst_us(fn: Callable[[], object]) -> float:
    """Host µs per call over `BURST` calls started on an idle GPU."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(BURST):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / BURST * 1e6


def back_to_back_us(fn: Callable[[], object]) -> float:
    """µs per call of `CALLS` calls and one synchronize."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / CALLS * 1e6


def loop_ns(fn: Callable[[], object], number: int = 20_000) -> float:
    """ns per call of a host-only call (no GPU work waits)."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e9


def rounds(cases: Sequence[Case], measure: Callable[[Callable[[], object]], float], n: int) -> dict[str, list[float]]:
    """`n` rounds of `measure` over every case, the cases taking turns within a round."""
    for _, fn in cases:
        fn()
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(n):
        for name, fn in cases:
            samples[name].append(measure(fn))
    return samples


def per_round(values: Sequence[float], base: Sequence[float]) -> list[float]:
    """Per round, a case's figure minus another's (measured in the same round)."""
    return [v - b for v, b in zip(values, base)]


def figure(values: Sequence[float]) -> str:
    """Median and spread (least-largest) of per-round values."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


@tt.jit
def empty_kernel(x_ptr):
    pass


def gpu_report(n: int) -> None:
    from cuda.bindings import driver as cu

    x, tiny = torch.randn(*SHAPE, device="cuda"), torch.zeros(1, device="cuda")
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
    threads, launcher = compiled.num_warps * 32, compiled.launcher
    values = (a.data_ptr(), b.data_ptr(), c.data_ptr(), 1024)
    libcuda = ctypes.CDLL("libcuda.so.1")
    func, params_p = ctypes.c_void_p(int(function)), ctypes.c_void_p(params.ctypes.data)
    config = ctypes.byref(LaunchConfig((ctypes.c_uint * 3)(1, 1, 1), (ctypes.c_uint * 3)(threads, 1, 1)))
    bound = launcher.bind((1, 1, 1), threads)
    cases: list[Case] = [
        (CUDA_PYTHON,
         lambda: cu.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, 0, params.ctypes.data, 0)),
        ("driver: ctypes cuLaunchKernel (11 arguments, prebuilt params)",
         lambda: libcuda.cuLaunchKernel(func, 1, 1, 1, threads, 1, 1, 0, None, params_p, None)),
        (RAW_EX,
         lambda: libcuda.cuLaunchKernelEx(config, func, params_p, None)),
        (BOUND_LAUNCH, lambda: bound(0, values)),
        ("tinyton Launcher.launch (4 values)", lambda: launcher.launch((1, 1, 1), threads, 0, 0, values)),
        (GRID_LAUNCH, lambda: add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)),
        ("tinyton empty_kernel[(1,)](x), cached", lambda: empty_kernel[(1,)](tiny)),
        (SOFTMAX, lambda: softmax(x)),
        (SOFTMAX_COLSUM, lambda: softmax_colsum(x)),
        ("torch x.add_(1) (1 element)", lambda: tiny.add_(1)),
        ("torch.add(a, b, out=c)", lambda: torch.add(a, b, out=c)),
        ("torch.softmax(x, -1)", lambda: torch.softmax(x, -1)),
    ]
    try:
        import triton_reference  # bench/: Triton's kernels, when Triton is installed

        cases += [
            ("Triton empty_kernel[(1,)](x)", lambda: triton_reference.empty_kernel[(1,)](tiny)),
            ("Triton add[grid](...)", lambda: triton_reference.add(a, b, c)),
        ]
    except ImportError:
        pass
    bursts = rounds(cases, burst_us, n)
    b2b = rounds(cases, back_to_back_us, max(5, n // 4))
    gpu = {name: tt.testing.do_bench(fn) * 1e3 for name, fn in [("softmax", lambda: softmax(x)),
                                                               ("softmax_colsum", lambda: softmax_colsum(x))]}
    print(f"device: {driver.device().name}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}; "
          f"{n} rounds of bursts of {BURST}, {max(5, n // 4)} of {CALLS} back-to-back; median (least-largest)\n")
    print("| what | host µs per call (bursts) | µs per call back-to-back |\n|---|---|---|")
    for name, _ in cases:
        print(f"| {name} | {figure(bursts[name])} | {figure(b2b[name])} |")
    print(f"| GPU time of softmax(x), softmax_colsum(x) (do_bench, µs) | {gpu['softmax']:.2f}, {gpu['softmax_colsum']:.2f} | |")

    grid_launch, bound_launch = bursts[GRID_LAUNCH], bursts[BOUND_LAUNCH]
    summary = [
        ("array call host time above GPU time, softmax (1 launch)", [t - gpu["softmax"] for t in b2b[SOFTMAX]], "≤ 8"),
        ("array call host time above GPU time, softmax_colsum (2 launches)",
         [t - gpu["softmax_colsum"] for t in b2b[SOFTMAX_COLSUM]], ""),
        ("array call host time above tinyton's bound launch, softmax (bursts, per round)",
         per_round(bursts[SOFTMAX], bound_launch), ""),
        ("same, softmax_colsum above two bound launches", per_round(bursts[SOFTMAX_COLSUM], [2 * b for b in bound_launch]), ""),
        ("kernel[grid] (cached, torch tensors, bursts)", grid_launch, "≤ 5"),
        ("kernel[grid] above tinyton's bound launch (per round)", per_round(grid_launch, bound_launch), ""),
        ("kernel[grid] above cuda-python's cuLaunchKernel (per round)", per_round(grid_launch, bursts[CUDA_PYTHON]), ""),
        ("tinyton's bound launch above ctypes cuLaunchKernelEx (per round)", per_round(bound_launch, bursts[RAW_EX]), ""),
    ]
    print("\n| summary | µs, median (least-largest) | goal |\n|---|---|---|")
    for name, values_, goal in summary:
        print(f"| {name} | {figure(values_)} | {goal} |")

    side = torch.cuda.Stream()
    host_rows = stage_cases(x, (a, b, c)) + stream_cases() + allocation_cases(x) + accessor_cases(x) + [
        ("driver.stream_capturing(side stream): a side-stream call's capture check", lambda: driver.stream_capturing(side.cuda_stream)),
    ]
    print_ns_table("stages, streams, CUDA allocations, accessors (ns per call, host only)", rounds(host_rows, loop_ns, 7))


def stage_cases(x: torch.Tensor, tensors: tuple[torch.Tensor, ...]) -> list[Case]:
    """The host-only stages of an array call (`softmax(x)`) and of a cached `add_kernel[(1,)](...)`."""
    softmax(x)
    key_of, entries = softmax._calls._last
    guard, _ = entries[key_of((x,))]
    call_shape = _torch_call_shape(*tensors)
    return [
        ("softmax(x): key function (argument types, shape, dtype, device)", lambda: key_of((x,))),
        ("softmax(x): key lookup", lambda: entries[key_of((x,))]),
        ("softmax(x): globals guard", guard),
        ("add_kernel[(1,)] (the grid's launcher)", lambda: add_kernel[(1,)]),
        ("add_kernel: classify torch tensors (plan key + parameter values)",
         lambda: call_shape.classify((*tensors, 1024), {"BLOCK": 1024})),
    ]


def stream_cases() -> list[Case]:
    """The ways to read the stream a launch goes to."""
    raw, device = torch._C._cuda_getCurrentRawStream, torch._C._cuda_getDevice
    return [
        ("stream: tt.stream's (none chosen: explicit_stream())", explicit_stream),
        ("stream: torch's, as tinyton reads it (torch_stream_reader()())", torch_stream_reader()),
        ("stream: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())", lambda: raw(device())),
        ("stream: torch.cuda.current_stream()", torch.cuda.current_stream),
        ("stream: torch.cuda.current_stream().cuda_stream", lambda: torch.cuda.current_stream().cuda_stream),
    ]


def allocation_cases(x: torch.Tensor) -> list[Case]:
    """The ways to allocate a tensor like `x` (its shape and dtype, on its device)."""
    shape, dtype, device = tuple(x.shape), x.dtype, x.device
    rows, cols = shape
    return [
        ("torch.empty(shape, dtype=, device=) (before)", lambda: torch.empty(shape, dtype=dtype, device=device)),
        ("torch.empty(rows, cols, dtype=, device=)", lambda: torch.empty(rows, cols, dtype=dtype, device=device)),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("torch.empty_strided(shape, strides, dtype=, device=)",
         lambda: torch.empty_strided(shape, (cols, 1), dtype=dtype, device=device)),
        ("x.new_empty(shape)", lambda: x.new_empty(shape)),
        ("x.new_empty(rows, cols, dtype=) (other dtypes, now)", lambda: x.new_empty(rows, cols, dtype=dtype)),
        ("x.new_empty(rows, cols) (now)", lambda: x.new_empty(rows, cols)),
    ]


def accessor_cases(x: torch.Tensor) -> list[Case]:
    return [(f"x.{name}", fn) for name, fn in [
        ("data_ptr()", x.data_ptr), ("dtype", lambda: x.dtype), ("is_cuda", lambda: x.is_cuda),
        ("device", lambda: x.device), ("get_device()", x.get_device), ("is_contiguous()", x.is_contiguous),
        ("stride()", x.stride), ("contiguous()", x.contiguous),
    ]]


def print_ns_table(title: str, samples: dict[str, list[float]]) -> None:
    print(f"\n| {title} | ns, median (least-largest) |\n|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f}) |")


def standin_report(n: int) -> None:
    """ns per stage of the Python paths, on the stand-in GPU."""
    from standin_gpu import NO_LAUNCH, device_array, standin_gpu

    cases: list[Case] = []
    with standin_gpu(softmax, softmax_colsum, add_kernel):
        x = torch.randn(*SHAPE)  # stands for a CUDA tensor
        for fn in (softmax, softmax_colsum):
            fn(x)
            key_of, entries = fn._calls._last
            guard, run = entries[key_of((x,))]
            name = fn.__name__
            cases += [
                (f"{name}(x): the whole call ({fn.compile(x).num_launches} launch(es))", lambda fn=fn: fn(x)),
                (f"  {name}: key function (argument types, shape, dtype, device)", lambda key_of=key_of: key_of((x,))),
                (f"  {name}: globals guard", guard),
                (f"  {name}: runner (inputs, allocations, stream, launches)", lambda run=run: run((x,))),
            ]
        cases.append(("stream: explicit, else the default (torch's current stream: on a GPU)", current_stream))
        a, b, c = (device_array((1024,), ptr=(1 + i) << 32) for i in range(3))
        add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
        launch, launcher = add_kernel[(1,)], add_kernel.compile(a, b, c, 1024, BLOCK=1024).launcher
        call_shape = next(iter(add_kernel._call_shapes.values()))
        values, bound = (a.ptr, b.ptr, c.ptr, 1024), launcher.bind((1, 1, 1), 128)
        config, params = ctypes.byref(LaunchConfig()), ctypes.c_void_p(1)
        ta, tb, tc = (torch.empty(1024) for _ in range(3))
        torch_shape = _torch_call_shape(ta, tb, tc)
        cases += [
            ("add_kernel[(1,)](a, b, c, n, BLOCK=1024), DeviceArrays", lambda: add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)),
            ("  add_kernel[(1,)] (the grid's launcher)", lambda: add_kernel[(1,)]),
            ("  the launcher's call", lambda: launch(a, b, c, 1024, BLOCK=1024)),
            ("  classify (key + parameter values)", lambda: call_shape.classify((a, b, c, 1024), {"BLOCK": 1024})),
            ("  the same for torch tensors", lambda: torch_shape.classify((ta, tb, tc, 1024), {"BLOCK": 1024})),
            ("  the bound launch (parameter record + the C call)", lambda: bound(0, values)),
            ("  Launcher.launch (finds the bound launch of its grid)", lambda: launcher.launch((1, 1, 1), 128, 0, 0, values)),
            ("  the C call alone (strnlen, cuLaunchKernelEx's 4 arguments)",
             lambda: NO_LAUNCH(config, None, params, None)),
        ]
        cases += allocation_cases(x) + accessor_cases(x)
        print_ns_table("stand-in GPU (no driver call, CPU tensors)", rounds(cases, loop_ns, n))


def _torch_call_shape(*tensors: torch.Tensor) -> object:
    from tinyton.frontend.arguments import classifier
    from tinyton.frontend.options import LAUNCH_OPTIONS

    return classifier(add_kernel.params, [*map(type, tensors), int], {"BLOCK": int}, LAUNCH_OPTIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standin", action="store_true", help="the stand-in GPU even where there is one")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds per case (bursts; back-to-back: a quarter)")
    args = parser.parse_args()
    if args.standin or not driver.is_available():
        standin_report(min(args.rounds, 11))
    else:
        gpu_report(args.rounds)


if __name__ == "__main__":
    main()
