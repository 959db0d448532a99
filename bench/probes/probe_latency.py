"""Latency-bound row programs (32x2048): where the microseconds go, tinyton next to Triton.

Per case, two figures per kernel: do_bench's CUDA-event median (what bench_fusion reports: launch, the
kernel and the gaps around it between two events; medians over rounds taken in turns) and the kernel's
own duration from the profiler's CUPTI records (the same calls, L2 flushed before each). The difference
is what the kernel does not control.

    python bench/probes/probe_latency.py [--cases softmax:32x2048:fp32,silu_gate:32x2048:fp16]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from bench_fusion import DTYPES, PROGRAMS, _inputs
from common import print_table
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

CASES = ",".join(f"{n}:32x2048:{d}" for d in ("fp32", "fp16") for n in PROGRAMS)
ROUNDS = 9


def event_us(fns: dict[str, object]) -> dict[str, float]:
    """do_bench medians (µs), the functions taking turns over ROUNDS rounds, median over rounds."""
    got = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for k, f in fns.items():
            got[k].append(do_bench(f, warmup=5, rep=20, return_mode="median") * 1e3)
    return {k: statistics.median(v) for k, v in got.items()}


def kernel_us(fn, calls: int = 200) -> float:
    """Mean CUPTI duration (µs) of the kernels `fn` launches, each call after an L2 flush."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    total = sum(e.device_time_total for e in prof.key_averages()
                if e.device_time_total > 0 and "at::native" not in e.key)  # not the flush
    return total / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    args = parser.parse_args()
    rows = []
    for case in args.cases.split(","):
        name, shape, dname = case.split(":")
        shape = tuple(int(v) for v in shape.split("x"))
        program, _, triton_fn = PROGRAMS[name]
        xs = _inputs(name, shape, DTYPES[dname])
        out = torch.empty_like(xs[0])
        fns = {"tinyton": lambda p=program, a=xs: p(*a), "Triton": lambda t=triton_fn, a=xs, o=out: t(*a, o)}
        for f in fns.values():
            f()
        events = event_us(fns)
        kernels = {k: kernel_us(f) for k, f in fns.items()}
        rows.append([f"{name} {shape[0]}x{shape[1]} {dname}", events["tinyton"], kernels["tinyton"],
                     events["Triton"], kernels["Triton"], f"{100 * events['Triton'] / events['tinyton']:.0f}%"])
        print("  " + " | ".join(f"{c:.2f}" if isinstance(c, float) else str(c) for c in rows[-1]), flush=True)
    print_table(f"Latency-bound programs on {torch.cuda.get_device_name()} (µs)",
                ["case", "tinyton events", "tinyton kernel (CUPTI)", "Triton events", "Triton kernel (CUPTI)",
                 "of Triton (events)"], rows)


if __name__ == "__main__":
    main()
