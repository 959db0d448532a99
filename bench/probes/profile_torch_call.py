"""Where a `torch.compile(backend="tinyton")` call's time goes, case by case (bench_torch's cases).

For each case: tinyton's and inductor's device time (do_bench), the wall time of one call back to back, and
the sum of the CUPTI durations of each one's kernels; then a cProfile of tinyton's steady-state call (the
functions with the most own time), so a host-bound row shows which layer holds it.

    python bench/probes/profile_torch_call.py [--config TinyLlama-1.1B] [--seq 128] [--dtype bf16] [--cases ...]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

import bench_path

bench_path.add()

import torch
from bench_torch import CONFIGS, DTYPES, call_us, cases, compiled, timed
from common import print_table
from torch.profiler import ProfilerActivity, profile

import tinyton.torch

CALLS = 20


def kernel_durations(fn, inputs) -> dict[str, float]:
    """CUPTI: µs per call of each kernel one call of `fn` launches (by name, in launch order)."""
    fn(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            fn(*inputs)
        torch.cuda.synchronize()
    durations: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            durations[e.name] = durations.get(e.name, 0.0) + e.time_range.elapsed_us() / CALLS
    return durations


def kernel_us(fn, inputs) -> tuple[float, int]:
    """CUPTI: the summed durations of one call's kernels, and how many kinds there are."""
    durations = kernel_durations(fn, inputs)
    return sum(durations.values()), len(durations)


def case_arguments(description: str, cases: str) -> argparse.ArgumentParser:
    """The options that pick bench_torch's cases: a model's shapes, a sequence length, a dtype, case names."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", default="TinyLlama-1.1B")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--cases", default=cases, help="comma-separated case names")
    return parser


@torch.no_grad()
def main() -> None:
    parser = case_arguments(__doc__.splitlines()[0], "")
    parser.add_argument("--profile", default="matmul (q_proj)", help="the case whose tinyton call is cProfiled")
    args = parser.parse_args()
    rows = []
    for name, (fn, inputs) in cases(CONFIGS[args.config], args.seq, DTYPES[args.dtype]).items():
        if args.cases and name not in args.cases.split(","):
            continue
        torch._dynamo.reset()
        ours = torch.compile(fn, backend=tinyton.torch.backend)
        ours(*inputs)
        row = [name, timed(ours, inputs), call_us(ours, inputs), *kernel_us(ours, inputs)]
        if name == args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(2000):
                ours(*inputs)
            prof.disable()
            torch.cuda.synchronize()
            print(f"# cProfile of 2000 tinyton calls of {name}")
            pstats.Stats(prof).sort_stats("tottime").print_stats(18)
        theirs = compiled(fn, "inductor")
        theirs(*inputs)
        row += [timed(theirs, inputs), call_us(theirs, inputs), *kernel_us(theirs, inputs)]
        rows.append(row)
        print("#", row, flush=True)
    print_table(f"{args.config} seq {args.seq} {args.dtype}: µs per call",
                ["case", "tinyton device", "tinyton call", "tinyton kernels", "n", "inductor device",
                 "inductor call", "inductor kernels", "n"], rows)


if __name__ == "__main__":
    main()
