"""A decode step's attention, every tuner candidate at several cache lengths: which form and KV split is fastest
where, and how far each is from reading the cache at copy bandwidth.

    python bench/probes/decode_attention_forms.py [--heads 8x4] [--d 64] [--lengths 256,512,1024,2048]

The problem is Llama's decode attention as the model traces it: per key/value head a block of the query heads
of its group (`--heads KVxGROUP`), float32 queries over a bf16 cache. Each candidate's kernels run on their
own; the figure is their mean CUPTI duration after an L2 flush (the cache is not in L2 in a real step: the
layer's weights stream through it), so launch gaps do not count.
"""

from __future__ import annotations

import argparse

import bench_path

bench_path.add()

from common import print_table
from probe_latency import kernel_us

from tinyton.compiler.tuning_runs import compile_candidates_ahead, program_timer
from tinyton.compiler.attention_tuning import attention_module
from tinyton.lowering.fusion.attention_blocks import AttentionProblem, Blocks, candidates
from tinyton.runtime import driver

COPY_BYTES_PER_US = 4.25e6
"""The H200's measured copy bandwidth (bench_llm.copy_bandwidth), bytes a microsecond."""


def kernel_time(p: AttentionProblem, blocks: Blocks, sm_count: int) -> float:
    """Mean µs of the kernels of attention `p` tiled by `blocks`."""
    timer = program_timer(attention_module(p), fuse=True, choose_blocks=lambda _: blocks, sm_count=sm_count)
    return kernel_us(timer._run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", default="8x4", help="key/value heads x query heads of a group")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--lengths", default="256,512,1024,2048")
    args = parser.parse_args()
    kv_heads, group = (int(v) for v in args.heads.split("x"))
    lengths = [int(v) for v in args.lengths.split(",")]
    sm_count = driver.device().sm_count
    problems = [AttentionProblem(kv_heads, group, s, args.d, args.d, "float32", False, "bfloat16") for s in lengths]
    # TF32x3 forms left out: three products each on tensor cores never beat FMAs at four query rows
    forms = list(dict.fromkeys(b for p in problems for b in candidates(p, sm_count) if not b.tf32x3))
    for p in problems:
        compile_candidates_ahead(attention_module(p), True, "choose_blocks", forms, sm_count=sm_count)
    rows = []
    for blocks in forms:
        form = "broadcast" if blocks.broadcast else "dot on FMAs"
        row: list[object] = [f"{form} {blocks.bm}x{blocks.bn}, {blocks.splits} chunks"]
        for p in problems:
            row.append(f"{kernel_time(p, blocks, sm_count):.2f}")
        rows.append(row)
    roofs = [f"{2 * p.batch * p.s_kv * p.d * p.kv_element_bytes / COPY_BYTES_PER_US:.2f}" for p in problems]
    rows.append(["cache bytes at copy bandwidth", *roofs])
    print_table(f"decode attention ({args.heads} heads, D {args.d}, f32 over a bf16 cache), µs of kernels",
                ["blocks", *(f"S {s}" for s in lengths)], rows)


if __name__ == "__main__":
    main()
