"""Each tile candidate of a matmul region timed through the tuner's own timer, in interleaved rounds (the
tuner picks from one window per candidate: this shows how far apart they really are), for the bf16 model
blocks of bench_fusion and the plain `x @ w.T` of the same shape, each candidate's results checked against the
first's (`autotune.agrees`: a tile the lowering gets wrong shows as WRONG, not as a time).

    python bench/probes/probe_matmul_tiles.py [--size 4096 | --shape 512x18944x3584] [--rounds 5]
        [--blocks gelu_mlp,swiglu] [--tiles 128x128x64w8s2,128x256x64w8s4ws]
        # these tiles only (`ws`: warp-specialised and persistent; default: the tuner's candidates, s3 and s4,
        # and the warp-specialised ones with --warp-specialize)

`--shape MxNxK` is x [M, K] against weights [N, K] (Qwen2.5-7B's gate/up projections at 512 tokens:
512x18944x3584). Run a new form alone first, under `timeout`: a wrong mbarrier protocol traps after seconds.
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
from tinyton.compiler.autotune import agrees
from tinyton.compiler.tuning_runs import program_timer
from tinyton.lowering.fusion.matmul_tiles import CANDIDATES, WARP_SPECIALIZED_CANDIDATES, MatmulTiles

TILE = re.compile(r"(\d+)x(\d+)x(\d+)w(\d+)s(\d+)(ws)?")


def parse_tiles(text: str) -> MatmulTiles:
    """`128x256x64w8s4` (block M x N x K, warps, stages), `ws` at the end for the warp-specialised form."""
    found = TILE.fullmatch(text)
    if found is None:
        raise SystemExit(f"tiles {text!r}: write them as 128x256x64w8s4 (ws at the end: warp-specialised)")
    *numbers, ws = found.groups()
    return MatmulTiles(*map(int, numbers), warp_specialize=ws is not None)


def tag(t: MatmulTiles) -> str:
    return f"{t.block_m}x{t.block_n}x{t.block_k} w{t.num_warps} s{t.num_stages}{' ws' if t.warp_specialize else ''}"


@tt.jit
def linear(x, w):
    return x @ w.T


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", default="x @ w.T,gelu_mlp,swiglu")
    parser.add_argument("--tiles", default="")
    parser.add_argument("--shape", default="", help="MxNxK (default: --size cubed)")
    parser.add_argument("--warp-specialize", action="store_true", help="also the warp-specialised candidates")
    args = parser.parse_args()
    m, n, k = map(int, args.shape.split("x")) if args.shape else (args.size,) * 3
    bf16 = ml_dtypes.bfloat16
    x, w, w3, b = np.zeros((m, k), bf16), np.zeros((n, k), bf16), np.zeros((n, k), bf16), np.zeros(n, bf16)
    blocks = {"x @ w.T": (linear, (x, w)), "gelu_mlp": (gelu_mlp, (x, w, b)), "swiglu": (swiglu, (x, w, w3))}
    if args.tiles:
        tiles = [parse_tiles(t) for t in args.tiles.split(",")]
    else:
        tiles = [t for t in CANDIDATES if t.block_m >= 64 and t.num_warps >= 4]
        tiles += [MatmulTiles(t.block_m, t.block_n, t.block_k, t.num_warps, 4) for t in tiles if t.num_stages == 3]
        tiles += list(WARP_SPECIALIZED_CANDIDATES) if args.warp_specialize else []
    for name in args.blocks.split(","):
        fn, inputs = blocks[name]
        graph = fn.compile(*inputs).graph
        timers = {}
        for t in tiles:
            try:
                timers[t] = program_timer(graph.clone(), fuse=True, choose_tiles=lambda _, t=t: t)
            except Exception as e:  # a candidate that does not compile (shared memory, registers) is reported
                print(f"{name} {t}: {type(e).__name__}: {str(e)[:120]}", flush=True)
        reference = next(iter(timers.values()), None)
        expected = reference.results() if reference is not None else []
        wrong = {t: how for t, timer in timers.items() if (how := agrees(timer.results(), expected)) is not None}
        times: dict[MatmulTiles, list[float]] = {t: [] for t in timers if t not in wrong}
        for _ in range(args.rounds):
            for t in times:
                times[t].append(timers[t]() * 1e3)
        flops = 2 * m * n * k * (2 if name == "swiglu" else 1)
        print(f"\n{name} {m}x{n}x{k} bf16 (µs, median of {args.rounds} rounds; min, max; TFLOPS)")
        for t, us in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
            median = statistics.median(us)
            print(f"  {tag(t):25s} {median:8.1f}  ({min(us):.1f}, {max(us):.1f})  {flops / median / 1e6:6.1f}", flush=True)
        for t, how in wrong.items():
            print(f"  {tag(t):25s} WRONG: {how}", flush=True)


if __name__ == "__main__":
    main()
