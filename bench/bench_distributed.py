"""Tensor-parallel Llama inference over the GPUs of one host: tinyton per rank + torch.distributed (NCCL),
against the same plain-torch model with torch.distributed, at TP = 1, 2, 4, ... in one run.

    python bench/bench_distributed.py [--tp 1,2,4] [--config llama-3-8b] [--layers 8] [--batch 1]
        [--prompt 512] [--steps 200]

The driver starts `torchrun --standalone --nproc-per-node N` of this file for each TP size; every rank holds
its shard (examples/distributed/tensor_parallel.py: column-parallel q/k/v and gate/up, row-parallel o and
down, an all-reduce after each) and times, on its own GPU:

- decode: one token step at position `prompt`..`prompt + steps` as one CUDA-graph replay (NCCL inside);
  tinyton against torch eager and torch under a CUDA graph (the same model, `bench/llama_torch.py`);
- prefill: the `prompt` tokens, tinyton against torch eager.

Rank 0 reports; the driver prints tokens/s, the speed-up over TP = 1 and the scaling efficiency
(speed-up / N). The 8B shape keeps `--layers` of its 32 layers and `lm_head` (the single-GPU reference run of
the LLM issue did the same).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "examples" / "distributed"), str(HERE.parent / "examples" / "llama")]


def rank_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", str(rank))))
    dist.init_process_group("nccl")
    result = measure(args, rank, world)  # its CUDA graphs (NCCL calls inside) are freed before the group
    torch.cuda.synchronize()
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def measure(args: argparse.Namespace, rank: int, world: int) -> dict[str, float]:
    import numpy as np
    import torch
    from common import back_to_back_ms
    from config import CONFIGS
    from llama_torch import TorchLlama, torch_weights
    from tensor_parallel import Rank, shard

    cfg = CONFIGS[args.config]
    if args.layers:
        cfg = replace(cfg, num_hidden_layers=args.layers)
    context = args.prompt + args.steps + 8
    weights = torch_weights(cfg, seed=0)  # the same on every rank (one seed), then each keeps its shard
    tokens = np.random.default_rng(1).integers(0, cfg.vocab_size, (args.batch, context)).astype(np.int32)
    model = Rank(cfg, weights, tokens, rank, world, f"cuda:{rank}", context)
    prefill_ms = back_to_back_ms(lambda: model.prefill(args.prompt), 3)
    model.prefill(args.prompt)
    model.pos.fill_(args.prompt)
    model.step()  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model.step()
    model.pos.fill_(args.prompt)
    tinyton_ms = back_to_back_ms(graph.replay, args.steps)

    layers = [{k: v.contiguous() for k, v in layer.items()} for layer in shard(cfg, weights, rank, world)]
    peer = TorchLlama(weights, args.batch, context, layers, parallel=world > 1)
    prompt = torch.from_numpy(tokens[:, : args.prompt]).cuda()
    torch_prefill_ms = back_to_back_ms(lambda: peer.forward(prompt, torch.arange(args.prompt, device="cuda")), 3)
    token = torch.zeros((args.batch, 1), dtype=torch.int32, device="cuda")
    pos = torch.tensor([args.prompt], device="cuda")
    step = lambda: peer.forward(token, pos)  # noqa: E731
    torch_eager_ms = back_to_back_ms(step, 20)
    peer_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(peer_graph):
        step()
    torch_graph_ms = back_to_back_ms(peer_graph.replay, args.steps)
    return {"tp": world, "tinyton": tinyton_ms, "torch eager": torch_eager_ms, "torch graph": torch_graph_ms,
            "prefill tinyton": prefill_ms, "prefill torch": torch_prefill_ms}


def driver_main(args: argparse.Namespace, argv: list[str]) -> None:
    import torch

    sizes = [int(n) for n in args.tp.split(",")]
    available = torch.cuda.device_count()
    results = []
    for n in sizes:
        if n > available:
            print(f"TP = {n}: skipped, this host has {available} GPU(s)")
            continue
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                   str(Path(__file__).resolve()), *argv]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "TINYTON_BENCH_RANK": "1"})
        lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if out.returncode or not lines:
            print(f"TP = {n} failed (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
            continue
        results.append(json.loads(lines[-1].removeprefix("RESULT ")))
    if not results:
        return
    base = next((r for r in results if r["tp"] == 1), results[0])
    name = torch.cuda.get_device_name()
    print(f"\n### {args.config} ({args.layers or 'all'} layers), batch {args.batch}, prompt {args.prompt}; {name}\n")
    print("| TP | tinyton tokens/s | torch eager | torch graph | vs best torch | speed-up | efficiency | "
          "prefill tinyton ms | prefill torch ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        tok = lambda ms: args.batch / ms * 1e3  # noqa: E731
        speedup = base["tinyton"] / r["tinyton"]
        best = min(r["torch eager"], r["torch graph"])
        print(f"| {r['tp']} | {tok(r['tinyton']):,.0f} | {tok(r['torch eager']):,.0f} | {tok(r['torch graph']):,.0f} | "
              f"{best / r['tinyton']:.2f}x | {speedup:.2f}x | {speedup / r['tp']:.0%} | "
              f"{r['prefill tinyton']:.1f} | {r['prefill torch']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tp", default="1,2,4")
    parser.add_argument("--config", default="llama-3-8b")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--steps", type=int, default=200)
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    if os.environ.get("TINYTON_BENCH_RANK"):
        rank_main(args)
    else:
        driver_main(args, argv)


if __name__ == "__main__":
    main()
