"""Small PyTorch models written the ways real ones are (Llama/Qwen, nanoGPT, microgpt) for the torch backend's tests.

Sizes are tiny so that the simulator runs them in seconds; the GPU tests and bench/bench_torch.py use the
same classes at real sizes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """Llama's RMSNorm written by hand."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LayerNorm(nn.Module):
    """LayerNorm written by hand (mean and biased variance)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(dim)), nn.Parameter(torch.zeros(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps) * self.weight + self.bias


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embeddings, HF style: halves sliced and concatenated."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rope_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


class LlamaBlock(nn.Module):
    """A Llama/Qwen decoder block: RMSNorm, GQA attention with RoPE through SDPA, SwiGLU MLP.
    `qkv_bias` (Qwen2) adds biases to q, k, v; `gqa="repeat"` repeats k, v by hand instead of `enable_gqa`."""

    def __init__(self, dim: int = 32, heads: int = 4, kv_heads: int = 2, hidden: int = 64, qkv_bias: bool = False,
                 gqa: str = "enable_gqa") -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.gqa = heads, kv_heads, dim // heads, gqa
        self.attn_norm, self.mlp_norm = RMSNorm(dim), nn.RMSNorm(dim, eps=1e-6)
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=qkv_bias)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=qkv_bias)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if self.gqa == "repeat":
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).contiguous().view(b, t, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class GPTBlock(nn.Module):
    """A nanoGPT block: LayerNorm, fused qkv split, attention written out with a causal masked_fill (or, `sdpa`,
    nanoGPT's flash path: `F.scaled_dot_product_attention(..., is_causal=True)`), GELU (tanh) MLP, dropout."""

    def __init__(self, dim: int = 32, heads: int = 4, dropout: float = 0.1, gelu: str = "tanh",
                 norm: type[nn.Module] = nn.LayerNorm, sdpa: bool = False) -> None:
        super().__init__()
        self.heads, self.gelu, self.sdpa = heads, gelu, sdpa
        self.ln_1, self.ln_2 = norm(dim), norm(dim)
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.c_fc, self.mlp_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            dropout = self.drop.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
            y = self.drop(F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.drop(self.c_proj(y))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate=self.gelu)))


class NanoGPT(nn.Module):
    """nanoGPT: token + position embeddings, blocks, final LayerNorm, tied lm_head, cross-entropy loss."""

    def __init__(self, vocab: int = 64, block_size: int = 16, dim: int = 32, heads: int = 4, layers: int = 1,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block_size, dim)
        self.blocks = nn.ModuleList(GPTBlock(dim, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class MicroGPT(nn.Module):
    """Karpathy's microgpt in torch: embeddings, RMSNorm, causal attention through SDPA, ReLU MLP, lm_head."""

    def __init__(self, vocab: int = 32, block_size: int = 16, dim: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block_size, dim)
        self.norm1, self.norm2, self.norm3 = RMSNorm(dim, 1e-5), RMSNorm(dim, 1e-5), RMSNorm(dim, 1e-5)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        b, t = idx.shape
        x = self.norm1(self.wte(idx) + self.wpe(torch.arange(t, device=idx.device)))
        q, k, v = self.qkv(self.norm2(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        x = x + self.fc2(F.relu(self.fc1(self.norm3(x))))
        logits = self.lm_head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class RelativeAttention(nn.Module):
    """T5's self-attention with its learned relative-position bias: each key's distance from the query put in one of
    `buckets` buckets (exact up to half of them, logarithmic beyond, both directions apart), a bias per head and
    bucket added to the scores (T5 scales neither by 1/sqrt(d))."""

    def __init__(self, dim: int = 32, heads: int = 4, buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.heads, self.buckets, self.max_distance = heads, buckets, max_distance
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.bias = nn.Embedding(buckets, heads)

    def bucket(self, relative: torch.Tensor) -> torch.Tensor:
        half = self.buckets // 2
        bucket = (relative > 0).to(torch.long) * half
        n = relative.abs()
        exact = half // 2
        large = exact + (torch.log(n.float() / exact) / math.log(self.max_distance / exact) * (half - exact)).long()
        return bucket + torch.where(n < exact, n, torch.clamp(large, max=half - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        position = torch.arange(t, device=x.device)
        bias = self.bias(self.bucket(position[None, :] - position[:, None])).permute(2, 0, 1)
        scores = q @ k.transpose(-1, -2) + bias
        y = scores.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class AlibiAttention(nn.Module):
    """Causal attention with ALiBi's bias (Press et al.): a slope per head times the key's distance from the query,
    `slope * (j - i)`, added to the scores in place of position embeddings."""

    def __init__(self, heads: int = 4):
        super().__init__()
        self.register_buffer("slopes", 2.0 ** -torch.arange(1, heads + 1, dtype=torch.float32))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.shape[2]
        position = torch.arange(t, device=q.device)
        bias = self.slopes[:, None, None] * (position[None, :] - position[:, None])
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=q.device), 1)
        return scores.masked_fill(causal, float("-inf")).softmax(-1) @ v


class TopKMoE(nn.Module):
    """A mixture-of-experts layer written with einsums (GShard's dense dispatch): each token's router softmax, its
    top-k experts' weights renormalised, a one-hot dispatch, every expert's SiLU MLP, the outputs combined."""

    def __init__(self, dim: int = 16, experts: int = 4, hidden: int = 32, k: int = 2) -> None:
        super().__init__()
        self.k, self.experts = k, experts
        self.router = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, dim, hidden) * 0.1)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, dim) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = self.router(x).softmax(-1).topk(self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        combine = torch.einsum("tk,tke->te", weights, F.one_hot(chosen, self.experts).to(x.dtype))
        h = F.silu(torch.einsum("td,edh->teh", x, self.w1))
        return torch.einsum("te,ted->td", combine, torch.einsum("teh,ehd->ted", h, self.w2))


class BertLayer(nn.Module):
    """A BERT encoder layer (post-norm) with Hugging Face's padding mask: `(1 - mask) * finfo.min` added to the scores
    of the keys past each sequence's end."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        scores = q @ k.transpose(-1, -2) / math.sqrt(c // self.heads) + bias
        y = scores.softmax(-1) @ v
        x = self.ln1(x + self.out(y.transpose(1, 2).reshape(b, t, c)))
        return self.ln2(x + self.ff(x))
