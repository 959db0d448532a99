"""A decode step with and without overlapped launches (programmatic dependent launch), in one process.

    python bench/probes/overlap_ab.py [--model llama-3.2-1b] [--layers 16] [--batch 1] [--rounds 3]

The same compiled program (its kernels carry `griddepcontrol.wait`, a no-op without the launch attribute) is
captured into a CUDA graph twice: launches with programmatic stream serialization, and plain launches
(`TINYTON_OVERLAP_LAUNCHES=0`, the call path made again). Alternates the two `--rounds` times so that clock drift
shows as spread, not as a difference.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import bench_path

bench_path.add()

import torch
from bench_llm import STEPS, _set_position
from common import back_to_back_ms
from decode_steps import decode_arguments
from llama_torch import torch_weights

sys.path.insert(0, str(Path(bench_path.BENCH).parent / "examples" / "llama"))
from config import CONFIGS
from generate import Sampling, TinytonEngine

from tinyton.compiler.launch_plan import OVERLAP_ENV


def step_ms(weights, args, overlap: bool) -> float:
    os.environ[OVERLAP_ENV] = "1" if overlap else "0"
    engine = TinytonEngine(weights, args.batch, args.context, Sampling(), graph=True)
    engine.program._runners.clear()  # the call path decides the launch attribute
    position = args.context // 2 - STEPS
    _set_position(engine, position)
    engine.step()
    engine.step()
    torch.cuda.synchronize()
    _set_position(engine, position)
    return back_to_back_ms(engine.step, STEPS, warmup=False)


def main() -> None:
    parser = decode_arguments(__doc__.splitlines()[0], layers=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cfg = replace(CONFIGS[args.model], num_hidden_layers=args.layers)
    weights = torch_weights(cfg)
    for _ in range(args.rounds):
        on, off = step_ms(weights, args, True), step_ms(weights, args, False)
        print(f"{args.model} ({args.layers} layers) batch {args.batch}: overlapped {on:.3f} ms, plain {off:.3f} ms "
              f"({off / on:.3f}x)", flush=True)


if __name__ == "__main__":
    main()
