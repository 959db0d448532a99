"""Run a few Llama decode steps with plain launches and nothing else: the program a kernel profiler (ncu)
attaches to, each kernel of the step its own launch.

    ncu -k 'regex:decode_program' python bench/probes/decode_steps.py [--model llama-3.2-1b] [--layers 2]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import bench_path

bench_path.add()

import torch
from bench_llm import _set_position
from llama_torch import torch_weights

sys.path.insert(0, str(Path(bench_path.BENCH).parent / "examples" / "llama"))
from config import CONFIGS
from generate import Sampling, TinytonEngine


def decode_arguments(description: str, layers: int) -> argparse.ArgumentParser:
    """The options of a decode probe: the model, its layers, the batch and the cache's context."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="llama-3.2-1b")
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--context", type=int, default=1024)
    return parser


def engine_of(args: argparse.Namespace, graph: bool = False) -> TinytonEngine:
    """The model of `args` (random weights, its layers cut to `--layers`) on tinyton, with plain launches (or
    a step one CUDA-graph replay)."""
    cfg = replace(CONFIGS[args.model], num_hidden_layers=args.layers)
    return TinytonEngine(torch_weights(cfg), args.batch, args.context, Sampling(), graph=graph)


def main() -> None:
    parser = decode_arguments(__doc__.splitlines()[0], layers=2)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    engine = engine_of(args)
    for _ in range(args.steps):
        _set_position(engine, args.context // 2)
        engine.step()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
