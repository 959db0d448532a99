"""microgpt on the GPU: per-token sampling latency, tokens/s and launches per token, plus training steps/s.

    python bench/bench_microgpt.py                       # every size (n_embd 16/64/256/1024, 1/4/12 layers, block 16/256)
    python bench/bench_microgpt.py --embd 16 --layers 1 --blocks 16    # Karpathy's size only

Backends: tinyton fused + one CUDA-graph replay per token, tinyton fused (plain launches), tinyton unfused,
NumPy on the CPU, torch eager and torch.compile(mode="reduce-overhead") on the GPU. A token step is the whole
network for one token with a KV cache plus sampling on the device (torch: `torch.multinomial`); latency is
wall time over `block_size` steps (one generated name, cache reset included) divided by `block_size`.
Weights are random (timing does not depend on them); heads are 4 at n_embd 16, else n_embd // 64.
One-shot mode (bench/common.py) defaults to n_embd 16 and 64, 2 layers, block 12.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent.parent / "examples" / "microgpt"))

from backward import BETA1, train_step, train_step_program
from common import DEVICE, ONESHOT, peer, pick, print_table, synchronize
from data import BOS, split
from generate import NumpyGenerator, TinytonGenerator
from model import Config, NumpyOps, init_params, layer_params


def per_token_us(run_name, block_size: int, rounds: int = 5) -> float:
    run_name()  # warm-up: compilation, loading, graph capture (the one run in one-shot mode)
    if ONESHOT:
        return math.nan
    run_name()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run_name()
        times.append((time.perf_counter() - start) / block_size * 1e6)
    return float(np.median(times))


def torch_step_fn(cfg: Config, params: list[np.ndarray], temperature: float = 0.5):
    """The same decode step in torch (weights `(in, out)`, caches `(H, T, D)` updated in place)."""
    w = [torch.from_numpy(p).to(DEVICE) for p in params]
    h, t, d = cfg.n_head, cfg.block_size, cfg.head_dim
    caches = [torch.zeros(h, t, d, device=DEVICE) for _ in range(2 * cfg.n_layer)]
    ar = torch.arange(t, device=DEVICE)

    def rms(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)

    def step(token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = rms(w[0][token] + w[1][pos])
        for i in range(cfg.n_layer):
            wq, wk, wv, wo, fc1, fc2 = layer_params(w, i)
            hh = rms(x)
            q = (hh @ wq).view(1, h, d).transpose(0, 1)
            kc, vc = caches[i], caches[cfg.n_layer + i]
            kc.index_copy_(1, pos, (hh @ wk).view(1, h, d).transpose(0, 1))
            vc.index_copy_(1, pos, (hh @ wv).view(1, h, d).transpose(0, 1))
            s = (q @ kc.mT) * d**-0.5
            s = s.masked_fill(ar > pos, float("-inf"))
            x = x + (torch.softmax(s, -1) @ vc).transpose(0, 1).reshape(1, cfg.n_embd) @ wo
            x = x + torch.relu(rms(x) @ fc1) @ fc2
        probs = torch.softmax((x @ w[2]).view(-1) / temperature, -1)
        return torch.multinomial(probs, 1).to(torch.int64)

    return step


def torch_name(step, cfg: Config):
    def run() -> None:
        token = torch.full((1,), BOS, dtype=torch.int64, device=DEVICE)
        for p in range(cfg.block_size):
            token = step(token, torch.full((1,), p, dtype=torch.int64, device=DEVICE)).clone()
        synchronize()

    return run


def decode_rows(cfg: Config) -> tuple[list[object], list[object]]:
    params = init_params(cfg, seed=0)
    fused_graph = TinytonGenerator(cfg, params)
    fused = TinytonGenerator(cfg, params, graph=False)
    unfused = TinytonGenerator(cfg, params, graph=False, fuse=False)
    numpy_gen = NumpyGenerator(cfg, params)
    eager = torch_step_fn(cfg, params)
    compiled = torch.compile(torch_step_fn(cfg, params), mode="reduce-overhead")
    t = cfg.block_size
    us = [
        per_token_us(fused_graph.tokens, t),
        per_token_us(fused.tokens, t),
        per_token_us(unfused.tokens, t),
        peer(per_token_us, lambda: numpy_gen.name(stop=False), t),
        peer(per_token_us, torch_name(eager, cfg), t),
        peer(per_token_us, torch_name(compiled, cfg), t),
    ]
    launches = (fused_graph.launches_per_token, unfused.launches_per_token)
    size = f"{cfg.n_embd}/{cfg.n_layer}/{cfg.block_size}"
    return (
        [size, *us, us[3] / us[0], us[5] / us[0]],
        [size, launches[0], f"{launches[0] / cfg.n_layer:.1f}", launches[1], 1],
    )


def train_row(cfg: Config, steps: int = 20, batch: int = 8) -> list[object]:
    params = init_params(cfg, seed=0)
    state = [*params, *(np.zeros_like(p) for p in params), *(np.zeros_like(p) for p in params)]
    rows = split(cfg.block_size)[0].rows(np.arange(batch))
    args = (cfg, *rows, *(np.array([v], np.float32) for v in (0.01, 1 - BETA1, 0.01)), *state)
    on_device = [torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE) if isinstance(a, np.ndarray) else a for a in args]

    def steps_per_s(fn, a) -> float:
        fn(*a)  # warm-up (the one run in one-shot mode)
        synchronize()
        if ONESHOT:
            return math.nan
        start = time.perf_counter()
        for _ in range(steps):
            fn(*a)
        synchronize()
        return steps / (time.perf_counter() - start)

    result = [steps_per_s(train_step_program, on_device), peer(steps_per_s, lambda *x: train_step(NumpyOps, *x), args)]
    launches = train_step_program.compile(*args).num_launches
    return [f"{cfg.n_embd}/{cfg.n_layer}/{cfg.block_size}", *result, launches]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embd", type=int, nargs="+", default=pick([16, 64, 256, 1024], [16, 64]))
    parser.add_argument("--layers", type=int, nargs="+", default=pick([1, 4, 12], [2]))
    parser.add_argument("--blocks", type=int, nargs="+", default=pick([16, 256], [12]))
    args = parser.parse_args()
    latency, launches, training = [], [], []
    for embd in args.embd:
        for layers in args.layers:
            for block in args.blocks:
                cfg = Config(layers, embd, 4 if embd == 16 else embd // 64, block)
                row, count = decode_rows(cfg)
                latency.append(row)
                launches.append(count)
                print(row, flush=True)
            training.append(train_row(Config(layers, embd, 4 if embd == 16 else embd // 64, min(args.blocks))))
            print(training[-1], flush=True)
    print_table(
        "microgpt sampling: µs per token (n_embd/n_layer/block_size)",
        ["size", "tinyton fused+graph", "tinyton fused", "tinyton unfused", "NumPy CPU", "torch eager",
         "torch.compile reduce-overhead", "NumPy / graph", "torch.compile / graph"],
        latency,
    )  # fmt: skip
    print_table(
        "microgpt: launches per token",
        ["size", "fused", "fused per layer", "unfused", "graph replays"],
        launches,
    )
    print_table("microgpt training: steps/s (batch 8)", ["size", "tinyton", "NumPy CPU", "launches/step"], training)


if __name__ == "__main__":
    main()
