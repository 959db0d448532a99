"""The Llama model of examples/llama in plain torch, the peer of bench_llm.py and bench_distributed.py.

bf16 throughout, a static KV cache written with `index_copy_`, SDPA with grouped-query heads. Given a rank's
shard of the weights (some heads, part of the MLP) and a process group, the row-parallel projections are
summed with `torch.distributed.all_reduce`: the same Megatron split as examples/distributed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "llama"))
from config import Config  # noqa: E402
from model import rope_tables  # noqa: E402
from weights import Weights, weight_shapes  # noqa: E402


def torch_weights(cfg: Config, seed: int = 0) -> Weights:
    g = torch.Generator(device="cuda").manual_seed(seed)
    tensors = {}
    for name, shape in weight_shapes(cfg).items():
        if len(shape) == 1:
            tensors[name] = torch.ones(shape, dtype=torch.bfloat16, device="cuda")
        else:
            tensors[name] = (torch.randn(shape, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    return Weights(cfg, tensors)


class TorchLlama:
    """The model in plain torch; `layers` (default: the weights' own) may be one rank's shard, whose
    row-parallel outputs are then all-reduced (`parallel=True`)."""

    def __init__(self, weights: Weights, batch: int, context: int, layers: list[dict] | None = None,
                 parallel: bool = False):  # fmt: skip
        cfg = self.cfg = weights.cfg
        self.w, self.layers, self.parallel = weights, layers or weights.layers, parallel
        d = cfg.head_dim
        self.heads = self.layers[0]["q_proj"].shape[0] // d
        self.kv_heads = self.layers[0]["k_proj"].shape[0] // d
        shape = (batch, self.kv_heads, context, d)
        self.kcache = [torch.zeros(shape, dtype=torch.bfloat16, device="cuda") for _ in range(cfg.num_hidden_layers)]
        self.vcache = [torch.zeros(shape, dtype=torch.bfloat16, device="cuda") for _ in range(cfg.num_hidden_layers)]
        cos, sin = rope_tables(cfg, context)
        self.cos = torch.from_numpy(cos).cuda().to(torch.bfloat16)
        self.sin = torch.from_numpy(sin).cuda().to(torch.bfloat16)

    def _norm(self, x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.cfg.rms_norm_eps)).to(x.dtype) * w

    @staticmethod
    def _rope(x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Logits of `tokens (B, T)` at positions `pos (T,)`, writing their keys and values into the cache."""
        cfg = self.cfg
        b, t = tokens.shape
        d, h, kvh = cfg.head_dim, self.heads, self.kv_heads
        x = F.embedding(tokens, self.w.embed)
        cos, sin = self.cos[pos], self.sin[pos]
        for layer, kc, vc in zip(self.layers, self.kcache, self.vcache):
            a = self._norm(x, layer["input_layernorm"])
            q = self._rope((a @ layer["q_proj"].T).view(b, t, h, d).transpose(1, 2), cos, sin)
            k = self._rope((a @ layer["k_proj"].T).view(b, t, kvh, d).transpose(1, 2), cos, sin)
            v = (a @ layer["v_proj"].T).view(b, t, kvh, d).transpose(1, 2)
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            end = int(pos[-1]) + 1 if t > 1 else kc.shape[2]
            mask = None if t > 1 else (torch.arange(kc.shape[2], device="cuda") <= pos[0])[None, :]
            o = F.scaled_dot_product_attention(q, kc[:, :, :end], vc[:, :, :end], attn_mask=mask,
                                               is_causal=t > 1, enable_gqa=True)  # fmt: skip
            x = x + self._reduce(o.transpose(1, 2).reshape(b, t, h * d) @ layer["o_proj"].T)
            m = self._norm(x, layer["post_attention_layernorm"])
            x = x + self._reduce((F.silu(m @ layer["gate_proj"].T) * (m @ layer["up_proj"].T)) @ layer["down_proj"].T)
        return self._norm(x[:, -1], self.w.norm) @ self.w.lm_head.T

    def _reduce(self, partial: torch.Tensor) -> torch.Tensor:
        if self.parallel:
            dist.all_reduce(partial)
        return partial
