"""Tensor-parallel Llama decoding: tinyton kernels on every rank, torch.distributed between them.

    torchrun --standalone --nproc-per-node N examples/distributed/tensor_parallel.py [--config tiny]
        [--steps 6] [--batch 2] [--graph]

The model of examples/llama split Megatron-style over N ranks: each rank holds 1/N of the query and key/value
heads (column-parallel q/k/v), the matching columns of the output projection (row-parallel o), 1/N of the
MLP's gate/up rows (column-parallel) and the matching columns of down (row-parallel). A layer is two
tinyton array programs per rank, each followed by a `torch.distributed.all_reduce` of its partial output:
the residual adds happen inside the next program. On GPUs (NCCL) each rank drives its own device
(`torch.cuda.set_device(rank)`) and, with `--graph`, the whole decode step, NCCL calls included, is one CUDA
graph replay per rank; without GPUs the ranks use gloo and tinyton's simulator.

Every step feeds the next token of a fixed random sequence (teacher forcing) and the logits are checked
against the same model in one process (NumPy): rank 0 prints the largest difference, then `OK`.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "llama"))
from config import CONFIGS, Config
from model import (
    NumpyOps,
    TinytonOps,
    attention,
    decode,
    decode_attention,
    mlp,
    qkv,
    rmsnorm,
    rope_tables,
)
from weights import BF16, Weights, random_weights

import tinyton as tt

TOLERANCE = 1e-2
"""Largest logit difference accepted, relative to the largest logit: each shard rounds its partial product
to bf16 before the sum (as Megatron's bf16 all-reduce does), where one process rounds the whole product once,
so the two differ by a few bf16 steps (2**-8 = 3.9e-3 relative)."""


def shard(cfg: Config, weights: Weights, rank: int, world: int) -> list[dict[str, np.ndarray]]:
    """Each layer's weights of one rank: its heads' q/k/v rows and o columns, its part of the MLP."""
    if cfg.num_key_value_heads % world or cfg.intermediate_size % world:
        raise ValueError(
            f"a world of {world} ranks does not divide {cfg.num_key_value_heads} key/value heads and "
            f"{cfg.intermediate_size} MLP rows; run with a divisor of both"
        )
    d = cfg.head_dim
    q = slice(rank * cfg.num_attention_heads // world * d, (rank + 1) * cfg.num_attention_heads // world * d)
    kv = slice(rank * cfg.num_key_value_heads // world * d, (rank + 1) * cfg.num_key_value_heads // world * d)
    f = slice(rank * cfg.intermediate_size // world, (rank + 1) * cfg.intermediate_size // world)
    return [
        {
            "input_layernorm": layer["input_layernorm"], "post_attention_layernorm": layer["post_attention_layernorm"],
            "q_proj": layer["q_proj"][q], "k_proj": layer["k_proj"][kv], "v_proj": layer["v_proj"][kv],
            "o_proj": _contiguous(layer["o_proj"][:, q]),
            "gate_proj": layer["gate_proj"][f], "up_proj": layer["up_proj"][f],
            "down_proj": _contiguous(layer["down_proj"][:, f]),
        }
        for layer in weights.layers
    ]  # fmt: skip


def _contiguous(a):
    """A column slice, contiguous (NumPy arrays and torch tensors alike)."""
    return a.contiguous() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)


ATTENTION = ("input_layernorm", "q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("post_attention_layernorm", "gate_proj", "up_proj", "down_proj")


@tt.jit
def embed_program(cfg, tokens, pos, embed):
    """The embedding of each sequence's token at `pos` `(B, 1, C)`."""
    token = TinytonOps.take(tokens, pos, 1).reshape(tokens.shape[0])
    return TinytonOps.f32(TinytonOps.take(embed, token, 0)).reshape(tokens.shape[0], 1, cfg.hidden_size)


@tt.jit
def attention_program(cfg, x, delta, pos, cos_table, sin_table, kc, vc, *weights):
    """`x + delta` (the last all-reduced MLP output), then this rank's attention partial; its heads' new rows
    go into the caches `kc`, `vc` (in place)."""
    ops, layer = TinytonOps, dict(zip(ATTENTION, weights))
    x = x + delta
    cos, sin = ops.take(cos_table, pos, 0), ops.take(sin_table, pos, 0)
    return x, decode_attention(ops, cfg, x, layer, cos, sin, kc, vc, pos, ops.arange(kc.shape[2]) <= pos)


@tt.jit
def prefill_attention_program(cfg, x, delta, cos, sin, kc, vc, *weights):
    """The prompt's version: causal attention over its own keys and values, which fill the caches' first
    positions (in place)."""
    ops, layer = TinytonOps, dict(zip(ATTENTION, weights))
    x = x + delta
    q, k, v = qkv(ops, cfg, x, layer, cos, sin)
    p = x.shape[1]
    kc[:, :, :p] = ops.bf16(k)
    vc[:, :, :p] = ops.bf16(v)
    keep = ops.arange(p)[:, None] >= ops.arange(p)[None, :]
    return x, ops.linear(attention(ops, q, k, v, keep), layer["o_proj"])


@tt.jit
def prefill_embed_program(cfg, tokens, embed):
    return TinytonOps.f32(TinytonOps.take(embed, tokens, 0))


@tt.jit
def mlp_program(cfg, x, delta, *weights):
    """`x + delta` (the all-reduced attention output), then this rank's MLP partial."""
    ops, layer = TinytonOps, dict(zip(MLP, weights))
    x = x + delta
    return x, mlp(ops, rmsnorm(ops, cfg, x, layer["post_attention_layernorm"]), layer)


@tt.jit
def head_program(cfg, x, delta, norm, lm_head):
    ops = TinytonOps
    x = x + delta
    return ops.linear(rmsnorm(ops, cfg, x, norm), lm_head).reshape(x.shape[0], cfg.vocab_size)


@tt.jit
def keep_logits_kernel(logits_ptr, history_ptr, pos_ptr, N, BLOCK: tt.constexpr):
    """`history[pos] = logits` (`N` values), then the position moves on."""
    pos = tt.load(pos_ptr)
    for start in range(0, N, BLOCK):
        i = start + tt.arange(0, BLOCK)
        tt.store(history_ptr + pos * N + i, tt.load(logits_ptr + i, mask=i < N), mask=i < N)
    tt.store(pos_ptr, pos + 1)


def to_torch(a, device: str) -> torch.Tensor:
    """A NumPy array (bf16 included) or a tensor, on `device`."""
    if isinstance(a, torch.Tensor):
        return a.to(device)
    a = np.ascontiguousarray(a)
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


class Rank:
    """One rank's shard on its device: the prompt's prefill and the decode step (teacher-forced: the token
    at each position comes from `tokens`)."""

    def __init__(self, cfg: Config, weights: Weights, tokens: np.ndarray, rank: int, world: int, device: str,
                 context: int | None = None):  # fmt: skip
        self.cfg, self.device = cfg, device
        self.layers = [{k: to_torch(v, device) for k, v in layer.items()} for layer in shard(cfg, weights, rank, world)]
        self.embed, self.norm, self.lm_head = (to_torch(w, device) for w in (weights.embed, weights.norm, weights.lm_head))
        b, steps = tokens.shape
        context = context or steps
        cos, sin = rope_tables(cfg, context)
        self.cos, self.sin, self.tokens = to_torch(cos, device), to_torch(sin, device), to_torch(tokens, device)
        kv = self.layers[0]["k_proj"].shape[0] // cfg.head_dim
        self.kcache = [torch.zeros((b, kv, context, cfg.head_dim), dtype=torch.bfloat16, device=device)
                       for _ in self.layers]  # fmt: skip
        self.vcache = [torch.zeros_like(c) for c in self.kcache]
        self.pos = torch.zeros(1, dtype=torch.int32, device=device)
        self.history = torch.zeros((context, b, cfg.vocab_size), device=device)
        self.zero = torch.zeros((b, 1, cfg.hidden_size), device=device)

    def _layers(self, x: torch.Tensor, attend) -> torch.Tensor:
        """Every layer: attention partial (which writes the layer's caches), all-reduce, MLP partial,
        all-reduce; the logits of the last position."""
        cfg, delta = self.cfg, torch.zeros_like(x)
        for layer, kc, vc in zip(self.layers, self.kcache, self.vcache):
            x, out = attend(x, delta, layer, kc, vc)
            dist.all_reduce(out)
            x, delta = mlp_program(cfg, x, out, *(layer[k] for k in MLP))
            dist.all_reduce(delta)
        return head_program(cfg, x[:, -1:], delta[:, -1:], self.norm, self.lm_head)

    def prefill(self, length: int) -> torch.Tensor:
        """The first `length` tokens at positions 0.. (the caches filled); the logits of the last one."""
        cfg = self.cfg
        self.pos.zero_()
        x = prefill_embed_program(cfg, self.tokens[:, :length].contiguous(), self.embed)
        cos, sin = self.cos[:length].contiguous(), self.sin[:length].contiguous()
        return self._layers(x, lambda x, delta, layer, kc, vc: prefill_attention_program(
            cfg, x, delta, cos, sin, kc, vc, *(layer[k] for k in ATTENTION)))

    def step(self) -> None:
        """The token at `pos`: its logits into `history[pos]`, then `pos + 1`."""
        cfg = self.cfg
        x = embed_program(cfg, self.tokens, self.pos, self.embed)
        logits = self._layers(x, lambda x, delta, layer, kc, vc: attention_program(
            cfg, x, delta, self.pos, self.cos, self.sin, kc, vc, *(layer[k] for k in ATTENTION)))
        keep_logits_kernel[(1,)](logits, self.history, self.pos, logits.numel(), BLOCK=1024)


def reference_logits(cfg: Config, weights: Weights, tokens: np.ndarray) -> np.ndarray:
    """The same steps in one process (NumPy): `(steps, B, vocab)`."""
    b, steps = tokens.shape
    cos, sin = rope_tables(cfg, steps)
    shape = (b, cfg.num_key_value_heads, steps, cfg.head_dim)
    caches = [np.zeros(shape, BF16) for _ in range(2 * cfg.num_hidden_layers)]
    out = []
    for pos in range(steps):  # each step writes its rows into the caches
        out.append(decode(NumpyOps, cfg, tokens[:, pos], np.array([pos], np.int32), cos, sin, *weights.flat(),
                          *caches))  # fmt: skip
    return np.stack(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--graph", action="store_true", help="replay each step as one CUDA graph (GPUs only)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a collective may wait for the others")
    args = parser.parse_args()
    gpu = torch.cuda.is_available() and os.environ.get("TINYTON_BACKEND", "auto") != "sim"
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", str(rank))))
    # A rank whose peers died or skipped a collective fails after the time-out, naming it, instead of hanging.
    dist.init_process_group("nccl" if gpu else "gloo", timeout=timedelta(seconds=args.timeout))
    try:
        cfg = CONFIGS[args.config]
        weights = random_weights(cfg, seed=0)
        tokens = np.random.default_rng(1).integers(0, cfg.vocab_size, (args.batch, args.steps)).astype(np.int32)
        model = Rank(cfg, weights, tokens, rank, world, f"cuda:{rank}" if gpu else "cpu")
        run(model, args.steps, graph=args.graph and gpu)
        got = model.history.float().cpu().numpy()
        if rank == 0:
            want = reference_logits(cfg, weights, tokens)
            diff = float(np.abs(got - want).max())
            relative = diff / float(np.abs(want).max())
            print(f"tensor parallel over {world} rank(s) ({'NCCL' if gpu else 'gloo, simulator'}): max abs "
                  f"difference of the logits against one process {diff:.2e} ({relative:.2e} of the largest)")  # fmt: skip
            if not relative <= TOLERANCE:
                raise SystemExit(f"FAILED: difference above {TOLERANCE} of the largest logit")
            print("OK")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run(model: Rank, steps: int, graph: bool) -> None:
    """`steps` decode steps, each one CUDA-graph replay with `graph` (the graph is freed on return, before
    the process group that its NCCL calls belong to)."""
    if not graph:
        for _ in range(steps):
            model.step()
        return
    model.step()  # compile and load everything outside the capture
    model.pos.zero_()
    captured = torch.cuda.CUDAGraph()
    with torch.cuda.graph(captured):
        model.step()
    model.pos.zero_()
    for _ in range(steps):
        captured.replay()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
