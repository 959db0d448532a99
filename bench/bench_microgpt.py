"""microgpt on the GPU: per-token sampling latency, tokens/s and launches per token, plus training steps/s.

    python bench/bench_microgpt.py                       # every size (n_embd 16/64/256/1024, 1/4/12 layers, block 16/256)
    python bench/bench_microgpt.py --embd 16 --layers 1 --blocks 16    # Karpathy's size only
    python bench/bench_microgpt.py --full                # no budget skips (unfused and torch.compile everywhere)

Backends: tinyton fused + one CUDA-graph replay per token, tinyton fused (plain launches), tinyton unfused,
NumPy on the CPU, torch eager and torch.compile(mode="reduce-overhead") on the GPU. A token step is the whole
network for one token with a KV cache plus sampling on the device (torch: `torch.multinomial`). tinyton's
latency is wall time over one generated row (`block_size` steps, reset included) / `block_size`; NumPy and
torch time `min(block_size, 32)` steps (a step attends over the whole cache under a mask, so its cost does
not depend on the position). Weights are random (timing does not depend on them); heads are 4 at n_embd 16,
else n_embd // 64. Training: steps/s of one training step (batch 8, random token rows, 1 layer per n_embd).

Budget (~8 minutes on an H100, `--deadline`): compilation dominates, so by default tinyton unfused runs at
block_size 16 only (its ~45 kernels per size are shared by every layer count) and torch.compile at 1 and 4
layers (a 12-layer step takes it about a minute); skipped cells print "skip". Sizes run smallest first and
no new size starts after the deadline. Needs no `names` package (the data are random tokens).
One-shot mode (bench/common.py) defaults to n_embd 16 and 64, 2 layers, block 12, each backend run once.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent.parent / "examples" / "microgpt"))

from backward import BETA1, train_step, train_step_program
from common import DEVICE, ONESHOT, peer, pick, print_table, synchronize
from generate import NumpyGenerator, TinytonGenerator
from model import Config, NumpyOps, init_params, layer_params
from tokens import BOS, VOCAB

MEASURE_S = 0.25
"""Timed rounds of one backend stop once they add up to this (at least one round, at most five)."""
REFERENCE_STEPS = 32


def per_token_us(run: Callable[[], None], tokens: int, warmup: int = 1) -> float:
    """Median wall µs per token of `run` (which generates `tokens` tokens), after `warmup` calls
    (compilation, loading, graph capture); one-shot mode: one run, NaN."""
    for _ in range(max(1, warmup)):
        run()
    if ONESHOT:
        return math.nan
    times: list[float] = []
    while len(times) < 5 and sum(times) * tokens * 1e-6 < MEASURE_S:
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) / tokens * 1e6)
    return float(np.median(times))


class TorchDecoder(torch.nn.Module):
    """The same decode step in torch: weights `(in, out)`, caches `(H, T, D)` updated in place (buffers at
    static addresses, so that reduce-overhead's CUDA graphs may mutate them)."""

    def __init__(self, cfg: Config, params: list[np.ndarray], temperature: float = 0.5):
        super().__init__()
        self.cfg, self.inv_temperature = cfg, 1.0 / temperature
        for i, p in enumerate(params):
            self.register_buffer(f"w{i}", torch.from_numpy(p).to(DEVICE))
        shape = (cfg.n_head, cfg.block_size, cfg.head_dim)
        for i in range(2 * cfg.n_layer):
            self.register_buffer(f"cache{i}", torch.zeros(shape, device=DEVICE))
        self.register_buffer("ar", torch.arange(cfg.block_size, device=DEVICE))
        for buffer in self.buffers():
            torch._dynamo.mark_static_address(buffer)

    @staticmethod
    def rms(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)

    def forward(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        h, d = cfg.n_head, cfg.head_dim
        w = [getattr(self, f"w{i}") for i in range(cfg.n_params)]
        x = self.rms(w[0][token] + w[1][pos])
        for i in range(cfg.n_layer):
            wq, wk, wv, wo, fc1, fc2 = layer_params(w, i)
            hh = self.rms(x)
            q = (hh @ wq).view(1, h, d).transpose(0, 1)
            kc, vc = getattr(self, f"cache{i}"), getattr(self, f"cache{cfg.n_layer + i}")
            kc.index_copy_(1, pos, (hh @ wk).view(1, h, d).transpose(0, 1))
            vc.index_copy_(1, pos, (hh @ wv).view(1, h, d).transpose(0, 1))
            s = ((q @ kc.mT) * d**-0.5).masked_fill(self.ar > pos, float("-inf"))
            x = x + (torch.softmax(s, -1) @ vc).transpose(0, 1).reshape(1, cfg.n_embd) @ wo
            x = x + torch.relu(self.rms(x) @ fc1) @ fc2
        probs = torch.softmax((x @ w[2]).view(-1) * self.inv_temperature, -1)
        return torch.multinomial(probs, 1)


def torch_tokens(step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], steps: int) -> Callable[[], None]:
    positions = [torch.full((1,), p, dtype=torch.int64, device=DEVICE) for p in range(steps)]

    def run() -> None:
        token = torch.full((1,), BOS, dtype=torch.int64, device=DEVICE)
        for pos in positions:
            token = step(token, pos).clone()
        synchronize()

    return run


def decode_rows(cfg: Config, *, unfused: bool, compiled: bool) -> tuple[list[object], list[object]]:
    params = init_params(cfg, seed=0)
    t, ref = cfg.block_size, min(cfg.block_size, REFERENCE_STEPS)
    fused_graph = TinytonGenerator(cfg, params)
    fused = TinytonGenerator(cfg, params, graph=False)
    numpy_gen = NumpyGenerator(cfg, params)
    us: list[float | str] = [per_token_us(fused_graph.tokens, t), per_token_us(fused.tokens, t)]
    launches_unfused: int | str = "skip"
    if unfused:
        gen = TinytonGenerator(cfg, params, graph=False, fuse=False)
        us.append(per_token_us(gen.tokens, t))
        launches_unfused = gen.launches_per_token
    else:
        us.append("skip")
    us.append(peer(per_token_us, lambda: numpy_gen.name(stop=False, steps=ref), ref, warmup=0))
    with torch.no_grad():
        us.append(peer(lambda: per_token_us(torch_tokens(TorchDecoder(cfg, params), ref), ref)))
        if compiled and not ONESHOT:
            step = torch.compile(TorchDecoder(cfg, params), mode="reduce-overhead", dynamic=False)
            us.append(per_token_us(torch_tokens(step, ref), ref, warmup=3))
        else:
            us.append("skip")
    graph = us[0]
    assert isinstance(graph, float)
    ratios = [f"{u / graph:.1f}" if isinstance(u, float) else u for u in (us[3], us[5])]
    size = f"{cfg.n_embd}/{cfg.n_layer}/{cfg.block_size}"
    count = fused_graph.launches_per_token
    return (
        [size, *us, f"{1e6 / graph:.0f}", *ratios],
        [size, count, f"{count / cfg.n_layer:.1f}", launches_unfused, 1],
    )


def train_row(cfg: Config, batch: int = 8) -> list[object]:
    params = init_params(cfg, seed=0)
    state = [*params, *(np.zeros_like(p) for p in params), *(np.zeros_like(p) for p in params)]
    rng = np.random.default_rng(0)
    rows = (
        rng.integers(0, VOCAB, (batch, cfg.block_size)).astype(np.int32),
        rng.integers(0, VOCAB, (batch, cfg.block_size)).astype(np.int32),
        np.ones((batch, cfg.block_size), np.float32),
    )
    args = (cfg, *rows, *(np.array([v], np.float32) for v in (0.01, 1 - BETA1, 0.01)), *state)
    on_device = [torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE) if isinstance(a, np.ndarray) else a for a in args]

    def steps_per_s(fn: Callable[..., object], a: list[object]) -> float:
        fn(*a)  # warm-up (the one run in one-shot mode)
        synchronize()
        if ONESHOT:
            return math.nan
        steps, start = 0, time.perf_counter()
        while steps < 3 or (time.perf_counter() - start < 1.0 and steps < 200):
            fn(*a)
            steps += 1
        synchronize()
        return steps / (time.perf_counter() - start)

    result = [steps_per_s(train_step_program, on_device), peer(steps_per_s, lambda *x: train_step(NumpyOps, *x), args)]
    launches = train_step_program.compile(*args).num_launches
    return [f"{cfg.n_embd}/{cfg.n_layer}/{cfg.block_size}", *result, launches]


def heads(embd: int) -> int:
    return 4 if embd == 16 else max(1, embd // 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embd", type=int, nargs="+", default=pick([16, 64, 256, 1024], [16, 64]))
    parser.add_argument("--layers", type=int, nargs="+", default=pick([1, 4, 12], [2]))
    parser.add_argument("--blocks", type=int, nargs="+", default=pick([16, 256], [12]))
    parser.add_argument("--full", action="store_true", help="no budget skips (unfused, torch.compile everywhere)")
    parser.add_argument("--no-train", action="store_true", help="skip the training rows")
    parser.add_argument("--deadline", type=float, default=400.0, help="start no new size after this many seconds")
    args = parser.parse_args()
    start = time.perf_counter()
    latency, launches, training, skipped = [], [], [], []
    sizes = sorted(
        ((e, n, b) for e in args.embd for n in args.layers for b in args.blocks),
        key=lambda s: (s != (16, 1, 16), s[0] * s[1] * s[2], s),
    )
    for embd, layers, block in sizes:
        if time.perf_counter() - start > args.deadline:
            skipped.append(f"{embd}/{layers}/{block}")
            continue
        cfg = Config(layers, embd, heads(embd), block)
        row, count = decode_rows(cfg, unfused=args.full or block <= 16, compiled=args.full or layers <= 4)
        latency.append(row)
        launches.append(count)
        print(row, f"({time.perf_counter() - start:.0f} s)", flush=True)
    if not args.no_train:
        for embd in args.embd:
            if time.perf_counter() - start > args.deadline:
                skipped.append(f"training {embd}")
                continue
            training.append(train_row(Config(1, embd, heads(embd), min(args.blocks))))
            print(training[-1], flush=True)
    print_table(
        "microgpt sampling: µs per token (n_embd/n_layer/block_size)",
        ["size", "tinyton fused+graph", "tinyton fused", "tinyton unfused", "NumPy CPU", "torch eager",
         "torch.compile reduce-overhead", "graph tokens/s", "NumPy / graph", "torch.compile / graph"],
        latency,
    )  # fmt: skip
    print_table(
        "microgpt: launches per token", ["size", "fused", "fused per layer", "unfused", "graph replays"], launches
    )
    if training:
        print_table("microgpt training: steps/s (batch 8)", ["size", "tinyton", "NumPy CPU", "launches/step"], training)
    if skipped:
        print(f"\nnot run (past the {args.deadline:.0f} s deadline): {', '.join(skipped)}")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
