"""`F.scaled_dot_product_attention` as the math tinyton's flash-attention rewrite recognises.

torch dispatches SDPA to a kernel chosen per device (`_scaled_dot_product_flash_attention_for_cpu`,
`_efficient_attention`, cuDNN's, ...), each with its own results and backward op. Before AOTAutograd traces
the model, the backend replaces the call in dynamo's graph by `sdpa_math`: `softmax(q @ kᵀ * scale + mask) @ v`,
the causal mask from `arange`s, GQA by repeating k and v per group, and a row whose mask keeps no key giving 0
as torch's own math does. Its ATen ops translate one by one (tinyton/torch/rules.py), tinyton fuses the forward
into one flash-attention kernel, and autograd derives the backward from the same math; in a training step the
backward recomputes the forward's scores (tinyton/torch/attention_partition.py) and becomes FlashAttention-2's kernels. `nn.MultiheadAttention`'s
call (`F.multi_head_attention_forward`, one node of dynamo's graph) is replaced by one whose SDPA is `sdpa_math`, and
the fused op of an `nn.TransformerEncoderLayer` in inference by its layer's math.
"""

from __future__ import annotations

import math
from typing import Any
from unittest import mock

import torch
from torch.fx import GraphModule

SDPA = torch._C._nn.scaled_dot_product_attention


def sdpa_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
              dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    """torch's SDPA reference semantics (torch.nn.functional's documentation), written out. Grouped-query
    heads are computed as groups over one k/v head (q as (kv heads, group), k and v broadcast over the group),
    the form tinyton's flash attention reads k and v once per kv head in."""
    heads, kv_heads = q.size(-3), k.size(-3)
    if enable_gqa and kv_heads != heads:
        group = heads // kv_heads
        if attn_mask is not None and attn_mask.dim() >= 3:
            attn_mask = attn_mask.unsqueeze(-3) if attn_mask.size(-3) == 1 else attn_mask.unflatten(-3, (kv_heads, group))
        out = sdpa_math(q.unflatten(-3, (kv_heads, group)), k.unsqueeze(-3), v.unsqueeze(-3), attn_mask, dropout_p,
                        is_causal, scale)
        return out.flatten(-4, -3)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        rows = torch.arange(q.size(-2), device=q.device).unsqueeze(-1)
        scores = scores.masked_fill(torch.arange(k.size(-2), device=q.device) > rows, float("-inf"))
    empty = None
    if attn_mask is not None:
        # torch's math gives 0 for a row whose every score is -inf (its `_safe_softmax`), where a softmax gives NaN:
        # such a row attends to every key here and its output is zeroed, so its gradients are 0 as torch's are
        if attn_mask.dtype == torch.bool:
            empty = attn_mask.any(-1, keepdim=True).logical_not()
            scores = torch.where(attn_mask | empty, scores, float("-inf"))
        else:
            empty = (attn_mask == float("-inf")).all(-1, keepdim=True)
            scores = scores + attn_mask.masked_fill(empty, 0.0)
    p = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        p = torch.nn.functional.dropout(p, dropout_p)
    out = p @ v
    return out if empty is None else out.masked_fill(empty, 0.0)


def multi_head_attention_math(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`F.multi_head_attention_forward` (`nn.MultiheadAttention`, `nn.Transformer*Layer`) with its SDPA call as
    `sdpa_math`. dynamo keeps the function as one call, which AOTAutograd then traces; its SDPA would decompose into
    torch's own math (each of q and k scaled by the scale's root, `_safe_softmax`'s guards), which the
    flash-attention rewrite does not take: one `nn.MultiheadAttention` was 15 launches, its attention three."""
    with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", sdpa_math):
        return torch.nn.functional.multi_head_attention_forward(*args, **kwargs)


def encoder_layer_math(src: torch.Tensor, embed_dim: int, num_heads: int, in_proj_weight: torch.Tensor,
                       in_proj_bias: torch.Tensor, out_proj_weight: torch.Tensor, out_proj_bias: torch.Tensor,
                       use_gelu: bool, norm_first: bool, eps: float, norm1_weight: torch.Tensor,
                       norm1_bias: torch.Tensor, norm2_weight: torch.Tensor, norm2_bias: torch.Tensor,
                       linear1_weight: torch.Tensor, linear1_bias: torch.Tensor, linear2_weight: torch.Tensor,
                       linear2_bias: torch.Tensor, mask: torch.Tensor | None = None,
                       mask_type: int | None = None) -> torch.Tensor:
    """`torch._transformer_encoder_layer_fwd`, the fused op an `nn.TransformerEncoderLayer` (batch first) calls in
    inference, written out as its module's own path: self-attention (`multi_head_attention_math`), the feed-forward
    block, the two layer norms (both with `eps`, as the fused op takes them). `mask_type` 1: `mask` is the key padding
    mask `(B, S)`; 2: the merged mask `(B, H, S, S)`."""
    f = torch.nn.functional

    def attention(x: torch.Tensor) -> torch.Tensor:
        padding = mask if mask_type == 1 else None
        merged = mask.flatten(0, 1) if mask is not None and mask_type == 2 else None  # (B * H, S, S)
        seq_first = x.transpose(0, 1)
        out = multi_head_attention_math(seq_first, seq_first, seq_first, embed_dim, num_heads, in_proj_weight,
                                        in_proj_bias, None, None, False, 0.0, out_proj_weight, out_proj_bias,
                                        training=False, key_padding_mask=padding, need_weights=False,
                                        attn_mask=merged)[0]  # fmt: skip
        return out.transpose(0, 1)

    def feed_forward(x: torch.Tensor) -> torch.Tensor:
        hidden = f.linear(x, linear1_weight, linear1_bias)
        return f.linear(f.gelu(hidden) if use_gelu else f.relu(hidden), linear2_weight, linear2_bias)

    def norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return f.layer_norm(x, (embed_dim,), weight, bias, eps)

    if norm_first:
        x = src + attention(norm(src, norm1_weight, norm1_bias))
        return x + feed_forward(norm(x, norm2_weight, norm2_bias))
    x = norm(src + attention(src), norm1_weight, norm1_bias)
    return norm(x + feed_forward(x), norm2_weight, norm2_bias)


REWRITES = {SDPA: sdpa_math, torch.nn.functional.multi_head_attention_forward: multi_head_attention_math,
            torch._transformer_encoder_layer_fwd: encoder_layer_math}
"""The calls of a dynamo graph that `rewrite_sdpa` replaces: what each becomes."""


def rewrite_sdpa(gm: GraphModule) -> None:
    """Replace every SDPA call of a dynamo graph by `sdpa_math`, every multi-head attention's and encoder layer's by
    their math (`REWRITES`, in place)."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in REWRITES:
            node.target = REWRITES[node.target]
    gm.recompile()
