"""A PyTorch nanoGPT, unchanged, trained and sampled through `torch.compile(model, backend="tinyton")`.

`tinyton.torch.explain(model, ...)` compiles it as `torch.compile(model, backend="tinyton")` does and
reports what ran where. The model is plain torch (embeddings, LayerNorm, causal self-attention written out with a masked_fill, GELU
MLP, cross-entropy). tinyton compiles AOTAutograd's forward and backward graphs into fused kernels (the
attention becomes one flash-attention kernel); an eager copy of the model trains beside it from the same
weights, and the two loss curves must agree. Without a GPU the kernels run on tinyton's simulator (CPU
tensors), in well under a minute.

    python examples/torch_nanogpt.py
"""

from __future__ import annotations

import copy
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

import tinyton.torch

TEXT = (
    "the quick brown fox jumps over the lazy dog. a tiny compiler fuses kernels for a tiny model. "
    "softmax, layernorm and attention each become one kernel, and the backward pass is fused too. "
)
BLOCK, DIM, HEADS, LAYERS, STEPS, BATCH = 16, 32, 4, 2, 8, 4


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(DIM, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(DIM), CausalSelfAttention(), nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(approximate="tanh"), nn.Linear(4 * DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, DIM), nn.Embedding(BLOCK, DIM)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f, self.lm_head = nn.LayerNorm(DIM), nn.Linear(DIM, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits[:, -1, :]
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def batches(data: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(len(data) - BLOCK - 1, (BATCH,), generator=generator)
    x = torch.stack([data[s : s + BLOCK] for s in starts])
    y = torch.stack([data[s + 1 : s + 1 + BLOCK] for s in starts])
    return x, y


@torch.no_grad()
def sample(step: torch.nn.Module, prompt: torch.Tensor, tokens: int, generator: torch.Generator) -> torch.Tensor:
    """Append `tokens` tokens, each drawn from the logits of the last BLOCK tokens (one compiled shape)."""
    idx = prompt
    for _ in range(tokens):
        probs = F.softmax(step(idx[:, -BLOCK:]) / 0.8, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return idx


def main() -> tinyton.torch.Explanation:
    torch.manual_seed(0)
    chars = sorted(set(TEXT))
    data = torch.tensor([chars.index(c) for c in TEXT])
    model = GPT(len(chars))
    eager = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(0)
    # explain(model, ...) is torch.compile(model, backend="tinyton") plus a report of what ran where
    explanation = tinyton.torch.explain(model, *batches(data, generator))
    compiled = explanation.compiled
    opt, eager_opt = (torch.optim.AdamW(m.parameters(), lr=3e-3) for m in (model, eager))
    start = time.perf_counter()
    for i in range(STEPS):
        x, y = batches(data, generator)
        losses = []
        for m, o in ((compiled, opt), (eager, eager_opt)):
            loss = m(x, y)
            o.zero_grad()
            loss.backward()
            o.step()
            losses.append(loss.item())
        print(f"step {i:2d}  loss tinyton {losses[0]:.5f}  eager {losses[1]:.5f}")
        assert abs(losses[0] - losses[1]) < 1e-3 * max(1.0, abs(losses[1])), "tinyton's loss differs from eager's"
    print(f"trained {STEPS} steps in {time.perf_counter() - start:.1f} s")

    prompt = data[:BLOCK].unsqueeze(0)
    ours = sample(compiled, prompt, 24, torch.Generator().manual_seed(1))
    theirs = sample(eager, prompt, 24, torch.Generator().manual_seed(1))
    text = "".join(chars[i] for i in ours[0].tolist())
    print(f"sample: {text!r}")
    print("eager sampled the same text" if torch.equal(ours, theirs) else "eager's sample differs (logits within tolerance)")

    print(f"{explanation.num_launches} tinyton kernels per training forward; ops run in torch: "
          f"{explanation.fallbacks or 'none'}")
    if explanation.fallbacks:  # every op of this model has a rule: a fallback is a regression (CI runs this)
        raise SystemExit(f"FAILED: ran in torch:\n{explanation}")
    return explanation


if __name__ == "__main__":
    explanation = main()
