"""Host time of launches and array-program calls (issue 10 point 5), measured steadily on noisy hosts.

Every case is measured in many rounds, the cases taking turns within each round (a slow spell of the host
falls on all of them alike); each figure is the median over the rounds, with its spread (the rounds' least and
largest value). On a GPU host, per case:

- host µs per call in bursts (`BURST` calls, synchronize, repeat): calls short enough not to fill the launch
  queue, so the host's own time;
- µs per call back-to-back (`CALLS` calls, then one synchronize): host or GPU, whichever is slower.

The summary, with the issue's goals:

- **array call host time above GPU time** = µs per back-to-back call minus the program's GPU time (do_bench
  median), per round: what a stream of calls costs beyond the work itself (softmax 32x2048, one launch; and
  softmax then a column sum, two launches);
- **kernel[grid]** = host µs per cached `add_kernel[(1,)](a, b, c, n, BLOCK=1024)` with torch tensors, bursts;
- **kernel[grid] above Launcher.launch** = the same minus the driver `Launcher.launch` of the same kernel and
  values, per round (the driver call itself, 4-6.5 µs on the GPU hosts, is not tinyton's to cut).

Also: the ways to allocate a CUDA tensor and the torch accessors a launch reads (ns), the stream-capture check
of calls on side streams. Without a GPU (`--standin`, or automatically): the same Python paths on a stand-in GPU
(tests/standin_gpu.py: libc's labs in place of cuLaunchKernel, CPU torch tensors as device memory), ns per stage
of everything above the cuLaunchKernel call.

    python bench/host_overhead.py [--standin] [--rounds N]
"""

from __future__ import annotations

import argparse
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
from tinyton.runtime.streams import current_stream

SHAPE = (32, 2048)
BURST, CALLS = 128, 2000


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


def figure(values: Sequence[float]) -> str:
    """Median and spread (least-largest) of per-round values."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def gpu_report(n: int) -> None:
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
    threads, launcher = compiled.num_warps * 32, compiled.launcher
    values = (a.data_ptr(), b.data_ptr(), c.data_ptr(), 1024)
    cases: list[Case] = [
        ("raw cuLaunchKernel (cuda-python, prebuilt params)",
         lambda: cu.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, 0, params.ctypes.data, 0)),
        ("tinyton Launcher.launch (4 values)", lambda: launcher.launch((1, 1, 1), threads, 0, 0, values)),
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

    launch, grid_launch = bursts[cases[1][0]], bursts[cases[2][0]]
    summary = [
        ("array call host time above GPU time, softmax (1 launch)", [t - gpu["softmax"] for t in b2b[cases[3][0]]], "≤ 8"),
        ("array call host time above GPU time, softmax_colsum (2 launches)",
         [t - gpu["softmax_colsum"] for t in b2b[cases[4][0]]], ""),
        ("kernel[grid] (cached, torch tensors, bursts)", grid_launch, "≤ 5"),
        ("kernel[grid] above Launcher.launch (per round)", [g - d for g, d in zip(grid_launch, launch)], ""),
        ("Launcher.launch (the driver call and its parameter record)", launch, ""),
    ]
    print("\n| summary | µs, median (least-largest) | goal |\n|---|---|---|")
    for name, values_, goal in summary:
        print(f"| {name} | {figure(values_)} | {goal} |")

    side = torch.cuda.Stream()
    host_rows = allocation_cases(x) + accessor_cases(x) + [
        ("driver.stream_capturing(side stream): a side-stream call's capture check", lambda: driver.stream_capturing(side.cuda_stream)),
    ]
    print_ns_table("CUDA allocations, accessors (ns per call, host only)", rounds(host_rows, loop_ns, 7))


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
        values = (a.ptr, b.ptr, c.ptr, 1024)
        ta, tb, tc = (torch.empty(1024) for _ in range(3))
        torch_shape = _torch_call_shape(ta, tb, tc)
        cases += [
            ("add_kernel[(1,)](a, b, c, n, BLOCK=1024), DeviceArrays", lambda: add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)),
            ("  add_kernel[(1,)] (the grid's launcher)", lambda: add_kernel[(1,)]),
            ("  the launcher's call", lambda: launch(a, b, c, 1024, BLOCK=1024)),
            ("  classify (key + parameter values)", lambda: call_shape.classify((a, b, c, 1024), {"BLOCK": 1024})),
            ("  the same for torch tensors", lambda: torch_shape.classify((ta, tb, tc, 1024), {"BLOCK": 1024})),
            ("  Launcher.launch (parameter record + the C call)", lambda: launcher.launch((1, 1, 1), 128, 0, 0, values)),
            ("  the C call alone (labs, cuLaunchKernel's 11 arguments)",
             lambda: NO_LAUNCH(None, 1, 1, 1, 128, 1, 1, 0, None, None, None)),
        ]
        cases += allocation_cases(x) + accessor_cases(x)
        print_ns_table("stand-in GPU (no cuLaunchKernel, CPU tensors)", rounds(cases, loop_ns, n))


def _torch_call_shape(*tensors: torch.Tensor) -> object:
    from tinyton.frontend.arguments import classifier
    from tinyton.frontend.options import LAUNCH_OPTIONS

    return classifier(add_kernel.params, [*map(type, tensors), int], {"BLOCK": int}, LAUNCH_OPTIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standin", action="store_true", help="the stand-in GPU even where there is one")
    parser.add_argument("--rounds", type=int, default=41, help="rounds per case (bursts; back-to-back: a quarter)")
    args = parser.parse_args()
    if args.standin or not driver.is_available():
        standin_report(min(args.rounds, 11))
    else:
        gpu_report(args.rounds)


if __name__ == "__main__":
    main()
