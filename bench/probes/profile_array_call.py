"""Where the host time of one array-program call goes (latency-bound 32x2048 softmax).

Prints µs per call of the whole `softmax(x)`, of the compiled program alone, of `torch.empty` and of the bare
driver launch, then a cProfile of `softmax(x)`.

    python bench/probes/profile_array_call.py
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable

import torch

import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from bench_fusion import softmax


def us_per_call(fn: Callable[[], object], calls: int = 5000) -> float:
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    x = torch.randn(32, 2048, device="cuda")
    program = softmax.compile(x)
    program(x)
    step = program.steps[0]
    kernel = step.compiled
    cases = {
        "softmax(x)": lambda: softmax(x),
        "program(x)": lambda: program(x),
        "torch.empty": lambda: torch.empty((32, 2048), device=x.device),
        "driver launch": lambda: kernel.launcher.launch(step.grid, kernel.threads, 0, 0, (x.data_ptr(), x.data_ptr())),
    }
    for label, fn in cases.items():
        print(f"{label}: {us_per_call(fn):.2f} us/call")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(5000):
        softmax(x)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
