"""Where a Llama decode step's time goes: each tinyton kernel's CUPTI duration, next to the bytes it must read.

    python bench/probes/profile_decode.py [--model llama-3.2-1b] [--layers 4] [--batch 1] [--context 1024]

Runs the decode step of `examples/llama/generate.py` with plain launches (no CUDA graph, so each kernel is
its own profiler record) and prints one row per kernel of the step, in launch order, with its grid and
warps, and the total against the step's roofline (bench_llm's: the weights and the KV cache over the copy
bandwidth).
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
    args = decode_arguments(__doc__.splitlines()[0], layers=4).parse_args()
    position = args.context // 2
    engine = engine_of(args)
    _set_position(engine, position)
    engine.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            _set_position(engine, position)
            engine.step()
        torch.cuda.synchronize()
    durations: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in event.name.lower():
            durations[event.name] = durations.get(event.name, 0.0) + event.time_range.elapsed_us() / CALLS
    steps = {s.launch.name: s for s in engine.program.steps}
    rows = [[name, steps[name].grid if name in steps else "", steps[name].launch.num_warps if name in steps else "",
             f"{us:.1f}"] for name, us in durations.items()]  # fmt: skip
    total = sum(durations.values())
    roof = step_bytes(engine.cfg, args.batch, position) / copy_bandwidth() / 1e3
    print_table(f"{args.model} ({args.layers} layers) decode batch {args.batch}: {total:.1f} µs of kernels, "
                f"roofline {roof:.1f} µs", ["kernel", "grid", "warps", "µs"], rows)  # fmt: skip


if __name__ == "__main__":
    main()
