"""Each tile candidate of a matmul region timed through the tuner's own timer, in interleaved rounds (the
tuner picks from one window per candidate: this shows how far apart they really are), for the bf16 model
blocks of bench_fusion and the plain `x @ w.T` of the same shape.

    python bench/probes/probe_matmul_tiles.py [--size 4096] [--rounds 5] [--blocks gelu_mlp,swiglu]
        [--tiles 128x128x64w8s2,128x256x64w8s3]   # these tiles only (default: the tuner's candidates, s3 and s4)
"""

from __future__ import annotations

import argparse
import re
import statistics

import ml_dtypes
import numpy as np
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from model_blocks import gelu_mlp, swiglu

import tinyton as tt
from tinyton.compiler.tuning_runs import program_timer
from tinyton.lowering.fusion.matmul_tiles import CANDIDATES, MatmulTiles


@tt.jit
def linear(x, w):
    return x @ w.T


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", default="x @ w.T,gelu_mlp,swiglu")
    parser.add_argument("--tiles", default="")
    args = parser.parse_args()
    n, bf16 = args.size, ml_dtypes.bfloat16
    x, w, b = np.zeros((n, n), bf16), np.zeros((n, n), bf16), np.zeros(n, bf16)
    blocks = {"x @ w.T": (linear, (x, w)), "gelu_mlp": (gelu_mlp, (x, w, b)), "swiglu": (swiglu, (x, w, w))}
    if args.tiles:
        tiles = [MatmulTiles(*map(int, re.fullmatch(r"(\d+)x(\d+)x(\d+)w(\d+)s(\d+)", t).groups()))
                 for t in args.tiles.split(",")]
    else:
        tiles = [t for t in CANDIDATES if t.block_m >= 64 and t.num_warps >= 4]
        tiles += [MatmulTiles(t.block_m, t.block_n, t.block_k, t.num_warps, 4) for t in tiles if t.num_stages == 3]
    for name in args.blocks.split(","):
        fn, inputs = blocks[name]
        graph = fn.compile(*inputs).graph
        timers = {}
        for t in tiles:
            try:
                timers[t] = program_timer(graph.clone(), fuse=True, choose_tiles=lambda _, t=t: t)
            except Exception as e:  # a candidate that does not compile (shared memory, registers) is reported
                print(f"{name} {t}: {type(e).__name__}: {str(e)[:120]}", flush=True)
        times: dict[MatmulTiles, list[float]] = {t: [] for t in timers}
        for _ in range(args.rounds):
            for t, timer in timers.items():
                times[t].append(timer() * 1e3)
        print(f"\n{name} {n}x{n}x{n} bf16 (µs, median of {args.rounds} rounds; min, max)")
        for t, us in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
            tag = f"{t.block_m}x{t.block_n}x{t.block_k} w{t.num_warps} s{t.num_stages}"
            print(f"  {tag:22s} {statistics.median(us):8.1f}  ({min(us):.1f}, {max(us):.1f})", flush=True)


if __name__ == "__main__":
    main()
