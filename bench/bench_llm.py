"""Llama-architecture inference: decode tokens/s and prefill tokens/s, tinyton against plain torch and the roofline.

    python bench/bench_llm.py [--models tinyllama-1.1b,llama-3.2-1b,llama-3-8b] [--batches 1,8,32]
        [--prompts 512,2048] [--context 1024] [--layers-8b 8] [--peers eager,compile,max-autotune]

For each model shape (random bf16 weights made on the GPU; the 8B shape keeps `--layers-8b` of its 32 layers
and `lm_head`, as the issue's reference run did), in one process:

- decode: one token step per sequence at position `context // 2` of a `context`-long KV cache, batch 1/8/32.
  tinyton's step is `examples/llama/generate.py`'s (one CUDA-graph replay: the program, which writes the new
  cache rows in place, and the greedy draw); torch's is the same model in plain torch (SDPA with GQA, a static bf16 KV cache, `index_copy_`),
  eager and `torch.compile` (default and `mode="max-autotune"`), logits + argmax included.
- the roofline: the bytes a step must read (every weight once, the KV cache up to the position) over the
  device's copy bandwidth, measured here (a 2 GiB device-to-device copy).
- prefill: the prompt of 512 / 2048 tokens at batch 1, tokens per second.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from common import back_to_back_ms, device_name, median_ms, print_table
from llama_torch import TorchLlama, torch_weights

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "llama"))
from config import CONFIGS, Config
from generate import Sampling, TinytonEngine
from model import prefill_program, rope_tables
from weights import Weights, weight_shapes


def copy_bandwidth() -> float:
    """Device-to-device copy, bytes read + written per second (GB/s)."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * src.numel() / ms / 1e6


def step_bytes(cfg: Config, batch: int, position: int) -> int:
    weights = sum(math.prod(s) for n, s in weight_shapes(cfg).items() if n != "model.embed_tokens.weight") * 2
    weights += batch * cfg.hidden_size * 2  # the embedding rows
    if cfg.tie_word_embeddings:
        weights += cfg.vocab_size * cfg.hidden_size * 2
    kv = 2 * cfg.num_hidden_layers * batch * cfg.num_key_value_heads * position * cfg.head_dim * 2
    return weights + kv


STEPS = 200
"""Decode steps timed back to back (CUDA events around them): the position moves on by one each, as in use."""


def bench_decode(name: str, cfg: Config, weights: Weights, batches: list[int], context: int, peers: list[str],
                 bandwidth: float) -> list[list[object]]:  # fmt: skip
    """Step time at positions `context // 2` onwards (the cache holds `context // 2 + STEPS + 2` positions)."""
    rows = []
    position = context // 2
    length = position + STEPS + 2
    for batch in batches:
        engine = TinytonEngine(weights, batch, length, Sampling(), graph=True)
        _set_position(engine, position)
        engine.step()  # the eager call
        engine.step()  # the capture
        torch.cuda.synchronize()
        _set_position(engine, position)
        tinyton_ms = back_to_back_ms(engine.step, STEPS, warmup=False)  # warmed up above
        roof_ms = step_bytes(cfg, batch, position) / bandwidth / 1e6
        print(f"# {name} decode batch {batch}: tinyton {tinyton_ms:.3f} ms, roofline {roof_ms:.3f} ms", flush=True)
        model = TorchLlama(weights, batch, length)
        tokens = torch.zeros((batch, 1), dtype=torch.int32, device="cuda")
        pos = torch.tensor([position], device="cuda")

        def eager() -> torch.Tensor:
            return model.forward(tokens, pos).argmax(-1)

        results = {"eager": eager}
        if "compile" in peers:
            results["compile"] = torch.compile(eager)
        if "max-autotune" in peers:
            results["max-autotune"] = torch.compile(eager, mode="max-autotune")
        peer_ms = {k: median_ms(fn) for k, fn in results.items()}
        best = min(peer_ms.values())
        rows.append([name, batch, f"{roof_ms:.3f}", f"{tinyton_ms:.3f}", f"{roof_ms / tinyton_ms:.0%}",
                     *(f"{peer_ms[k]:.3f}" if k in peer_ms else "-" for k in ("eager", "compile", "max-autotune")),
                     f"{best / tinyton_ms:.2f}x", engine.launches_per_token])  # fmt: skip
        print(f"# {rows[-1]}", flush=True)  # a run cut short keeps what it measured
    return rows


def _set_position(engine: TinytonEngine, position: int) -> None:
    engine.pos.copy_from_host(np.array([position], np.int32))


def bench_prefill(name: str, cfg: Config, weights: Weights, prompts: list[int], peers: list[str]) -> list[list[object]]:
    rows = []
    for p in prompts:
        tokens = torch.randint(0, cfg.vocab_size, (1, p), dtype=torch.int32, device="cuda")
        cos, sin = (torch.from_numpy(t).cuda() for t in rope_tables(cfg, p))
        flat = weights.flat()
        caches = [torch.zeros((1, cfg.num_key_value_heads, p, cfg.head_dim), dtype=torch.bfloat16, device="cuda")
                  for _ in range(2 * cfg.num_hidden_layers)]  # the prefill fills them (in place)
        arrays = (tokens, cos, sin, *flat, *caches)
        tinyton_ms = median_ms(lambda arrays=arrays: prefill_program(cfg, *arrays))
        print(f"# {name} prefill {p}: tinyton {p / tinyton_ms * 1e3:,.0f} tokens/s", flush=True)
        model = TorchLlama(weights, 1, p)
        pos = torch.arange(p, device="cuda")

        def eager() -> torch.Tensor:
            return model.forward(tokens, pos)

        fns = {"eager": eager}
        if "compile" in peers:
            fns["compile"] = torch.compile(eager)
        if "max-autotune" in peers:
            fns["max-autotune"] = torch.compile(eager, mode="max-autotune")
        peer_ms = {k: median_ms(fn) for k, fn in fns.items()}
        rows.append([name, p, f"{p / tinyton_ms * 1e3:,.0f}",
                     *(f"{p / peer_ms[k] * 1e3:,.0f}" if k in peer_ms else "-"
                       for k in ("eager", "compile", "max-autotune")),
                     f"{min(peer_ms.values()) / tinyton_ms:.2f}x"])  # fmt: skip
        print(f"# {rows[-1]}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tinyllama-1.1b,llama-3.2-1b,llama-3-8b")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--prompts", default="512,2048")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--layers-8b", type=int, default=8)
    parser.add_argument("--peers", default="eager,compile,max-autotune")
    parser.add_argument("--skip", default="", help="decode and/or prefill")
    args = parser.parse_args()
    peers = args.peers.split(",")
    bandwidth = copy_bandwidth()
    print(f"device: {device_name()}; copy bandwidth {bandwidth:,.0f} GB/s")
    decode_rows, prefill_rows = [], []
    for name in args.models.split(","):
        cfg = CONFIGS[name]
        if name == "llama-3-8b":
            cfg = replace(cfg, num_hidden_layers=args.layers_8b)
            name = f"{name} ({args.layers_8b} layers)"
        weights = torch_weights(cfg)
        if "decode" not in args.skip:
            decode_rows += bench_decode(name, cfg, weights, [int(b) for b in args.batches.split(",")],
                                        args.context, peers, bandwidth)  # fmt: skip
        if "prefill" not in args.skip:
            prefill_rows += bench_prefill(name, cfg, weights, [int(p) for p in args.prompts.split(",")], peers)
        del weights
        torch.cuda.empty_cache()
    print_table(f"decode step (ms), KV position {args.context // 2}",
                ["model", "batch", "roofline", "tinyton", "of roofline", "eager", "compile", "max-autotune",
                 "vs best torch", "launches"], decode_rows)  # fmt: skip
    print_table("prefill (tokens/s), batch 1", ["model", "prompt", "tinyton", "eager", "compile", "max-autotune",
                                                "vs best torch"], prefill_rows)  # fmt: skip


if __name__ == "__main__":
    main()
