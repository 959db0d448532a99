"""The layers of one `torch.compile(backend="tinyton")` call, timed one inside the other on the GPU host.

For each case: µs per call, back to back, of the compiled function (dynamo, AOTAutograd, the partition), of
the partition's variant (argument conversions and result checks), of its array program (`program(*args)`:
the runner lookup), of the runner alone (allocation and launches), and of the kernels' CUPTI durations; and
how many TMA maps were encoded during the timed calls (a miss uploads a map before the launch).

    python bench/probes/profile_torch_layers.py [--config TinyLlama-1.1B] [--seq 128] [--dtype bf16]
"""

from __future__ import annotations


import bench_path

bench_path.add()

import torch
from bench_torch import CONFIGS, DTYPES, cases
from common import print_table
from profile_array_call import us_per_call
from profile_torch_call import case_arguments, kernel_durations, kernel_us

import tinyton.torch
from tinyton.runtime import tensor_maps
from tinyton.torch.compiled_partition import CompiledPartition, _key


@torch.no_grad()
def main() -> None:
    args = case_arguments(__doc__.splitlines()[0], "matmul (q_proj),rmsnorm,softmax,silu_mul").parse_args()
    encoded = [0]
    encode = tensor_maps.encode

    def counting(key: tuple) -> object:
        encoded[0] += 1
        return encode(key)

    tensor_maps.encode = counting
    made: list[CompiledPartition] = []
    init = CompiledPartition.__init__

    def recording(self: CompiledPartition, *a: object) -> None:
        init(self, *a)
        made.append(self)

    CompiledPartition.__init__ = recording
    rows = []
    for name, (fn, inputs) in cases(CONFIGS[args.config], args.seq, DTYPES[args.dtype]).items():
        if name not in args.cases.split(","):
            continue
        torch._dynamo.reset()
        made.clear()
        ours = torch.compile(fn, backend=tinyton.torch.backend)
        ours(*inputs)
        ours(*inputs)
        partition = next(p for p in made if p.variants)
        captured: list[tuple] = []
        call = CompiledPartition.__call__
        CompiledPartition.__call__ = lambda self, *a: captured.append(a) or call(self, *a)
        ours(*inputs)
        CompiledPartition.__call__ = call
        part_args = captured[0]
        variant = partition.variants[_key(part_args)]
        program = variant.program
        runner = program.runner(part_args)
        encoded[0] = 0
        row = [name, us_per_call(lambda: ours(*inputs)), us_per_call(lambda: partition(*part_args)),
               us_per_call(lambda: variant(part_args)), us_per_call(lambda: program(*part_args)),
               us_per_call(lambda: runner(part_args)), *kernel_us(ours, inputs), encoded[0]]
        rows.append(row)
        print("#", row, flush=True)
        print(getattr(runner, "source", "(no generated source)"))
        for kernel, us in kernel_durations(ours, inputs).items():
            print(f"#   {us:8.1f} µs  {kernel[:110]}")
    print_table(f"{args.config} seq {args.seq} {args.dtype}: µs per call, back to back",
                ["case", "compiled fn", "partition", "variant", "program", "runner", "kernels", "n",
                 "maps encoded"], rows)


if __name__ == "__main__":
    main()
