"""Where a Llama decode step's time goes: each tinyton kernel's CUPTI duration, next to the bytes it must read.

    python bench/probes/profile_decode.py [--model llama-3.2-1b] [--layers 4] [--batch 1] [--context 1024] [--timeline]

Runs the decode step of `examples/llama/generate.py` without a CUDA graph (so each kernel is its own profiler
record) and prints one row per kernel of the step, in launch order, with its grid and warps, and the total
against the step's roofline (bench_llm's: the weights and the KV cache over the copy bandwidth).
`--timeline` prints the last step's kernels instead: when each started after the step's first, how long it
ran, and its gap after the kernel before (negative: the two overlapped, as launches that overlap do;
`TINYTON_OVERLAP_LAUNCHES=0` makes them plain); `--graph` runs each step as the CUDA-graph replay bench_llm
times (without it the host's launches leave gaps of their own).
"""

from __future__ import annotations

import bench_path

bench_path.add()

import torch
from bench_llm import _set_position, copy_bandwidth, step_bytes
from common import print_table
from decode_steps import decode_arguments, engine_of
from torch.profiler import ProfilerActivity, profile

CALLS = 20


def main() -> None:
    parser = decode_arguments(__doc__.splitlines()[0], layers=4)
    parser.add_argument("--timeline", action="store_true", help="the last step's kernels: starts, gaps")
    parser.add_argument("--graph", action="store_true", help="each step one CUDA-graph replay (with --timeline)")
    args = parser.parse_args()
    position = args.context // 2
    engine = engine_of(args, graph=args.graph)
    _set_position(engine, position)
    engine.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            _set_position(engine, position)
            engine.step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower()]
    if args.timeline:
        _print_timeline(kernels[-len(kernels) // CALLS :], engine, args)
        return
    durations: dict[str, float] = {}
    for event in kernels:
        durations[event.name] = durations.get(event.name, 0.0) + event.time_range.elapsed_us() / CALLS
    steps = {s.launch.name: s for s in engine.program.steps}
    rows = [[name, steps[name].grid if name in steps else "", steps[name].launch.num_warps if name in steps else "",
             f"{us:.1f}"] for name, us in durations.items()]  # fmt: skip
    total = sum(durations.values())
    roof = step_bytes(engine.cfg, args.batch, position) / copy_bandwidth() / 1e3
    print_table(f"{args.model} ({args.layers} layers) decode batch {args.batch}: {total:.1f} µs of kernels, "
                f"roofline {roof:.1f} µs", ["kernel", "grid", "warps", "µs"], rows)  # fmt: skip


def _print_timeline(step: list, engine, args) -> None:
    """One step's kernels in start order: start after the first's, duration, gap after the one before."""
    step = sorted(step, key=lambda e: e.time_range.start)
    t0, end, rows = step[0].time_range.start, step[0].time_range.start, []
    for e in step:
        start, stop = e.time_range.start, e.time_range.end
        rows.append([e.name, f"{start - t0:.1f}", f"{stop - start:.1f}", f"{start - end:.1f}"])
        end = stop
    busy = sum(e.time_range.elapsed_us() for e in step)
    print_table(f"{args.model} ({args.layers} layers) decode batch {args.batch}, one step: {end - t0:.1f} µs from "
                f"the first start to the last end, {busy:.1f} µs of kernel durations",
                ["kernel", "start µs", "µs", "gap µs"], rows)  # fmt: skip


if __name__ == "__main__":
    main()
