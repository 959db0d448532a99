"""`F.scaled_dot_product_attention` as the math tinyton's flash-attention rewrite recognises.

torch dispatches SDPA to a kernel chosen per device (`_scaled_dot_product_flash_attention_for_cpu`,
`_efficient_attention`, cuDNN's, ...), each with its own results and backward op. Before AOTAutograd traces
the model, the backend replaces the call in dynamo's graph by `sdpa_math`: `softmax(q @ kᵀ * scale + mask) @ v`,
the causal mask from `arange`s, GQA by repeating k and v per group, and a row whose mask keeps no key giving 0
as torch's own math does. Its ATen ops translate one by one (tinyton/torch/rules.py), tinyton fuses the forward
into one flash-attention kernel, and autograd derives the backward from the same math; in a training step the
backward recomputes the forward's scores (`recompute_attention`) and becomes FlashAttention-2's kernels. `nn.MultiheadAttention`'s
call (`F.multi_head_attention_forward`, one node of dynamo's graph) is replaced by one whose SDPA is `sdpa_math`, and
the fused op of an `nn.TransformerEncoderLayer` in inference by its layer's math.
"""

from __future__ import annotations

import math
import operator
from typing import Any
from unittest import mock

import torch
from torch._functorch.partitioners import default_partition
from torch.fx import GraphModule
from torch.utils.checkpoint import CheckpointPolicy

from tinyton.dialects.tt import DOT_MIN

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


aten = torch.ops.aten
PRODUCTS = (aten.bmm, aten.mm)
VIEW_OPS = (aten.view, aten._unsafe_view, aten.expand, aten.clone, aten.permute, aten.transpose, aten.unsqueeze,
            aten.squeeze, aten.alias, aten.slice, aten._to_copy)
"""Layout ops between the operands of a written-out attention and its products (and casts): free to recompute."""
SPLITS = (aten.split, aten.split_with_sizes, aten.unbind)
SCORE_OPS = (aten.mul, aten.div, aten.add, aten.sub, aten.neg, aten.where, aten.masked_fill, aten.full,
             aten.scalar_tensor, aten.arange, aten.le, aten.lt, aten.ge, aten.gt, aten.eq, aten.ne, aten.logical_and,
             aten.logical_or, aten.logical_not, aten.bitwise_not, aten.bitwise_and, aten.bitwise_or)
"""The steps between `q @ kᵀ` and the softmax (scale, bias, masks) and the index arithmetic of causal masks."""


def _forward_calls(joint: GraphModule) -> list[Any]:
    return [n for n in joint.graph.nodes if n.op == "call_function" and n.meta.get("partitioner_tag") != "is_backward"]


def _packet(node: Any) -> Any:
    return getattr(node.target, "overloadpacket", None)


def _sdpa_regions(joint: GraphModule) -> list[list[Any]]:
    """The forward ops of each SDPA call (its `sdpa_math`), by dynamo's source records."""
    regions: dict[str, list[Any]] = {}
    for node in _forward_calls(joint):
        calls = [name for name, target in node.meta.get("source_fn_stack") or [] if target is SDPA]
        if calls:
            regions.setdefault(calls[-1], []).append(node)
    return list(regions.values())


def _written_out_region(softmax: Any) -> list[Any] | None:
    """The forward ops of an attention written out by hand around `softmax` (nanoGPT's `(q @ kᵀ) * scale`,
    `masked_fill`, `softmax`, `@ v`): the score steps and mask arithmetic back to `q @ kᵀ`, the product of the
    probabilities with v, and the layout ops of both products' operands; None when the softmax is not between two
    products that way (dropout between it and `@ v` included: its random numbers would be drawn again)."""
    region, p = [softmax], softmax
    while True:  # through layout ops to `@ v`; an `alias` is what autograd keeps of the probabilities
        region += [u for u in p.users if _packet(u) is aten.alias]
        users = [u for u in p.users if _packet(u) is not aten.alias]
        if len(users) != 1 or _packet(users[0]) not in VIEW_OPS:
            break
        p = users[0]
        region.append(p)
    pv = next((u for u in p.users if _packet(u) in PRODUCTS and u.args[0] is p), None)
    if pv is None:
        return None
    region += [pv, *_layout_ops(pv.args[1])]
    pending, qk = [softmax.args[0]], None
    while pending:
        node = pending.pop()
        if not hasattr(node, "op") or node.op != "call_function" or node in region:
            continue
        if _packet(node) in PRODUCTS and qk is None:
            qk = node
            region += [qk, *(op for a in qk.args for op in _layout_ops(a))]
        elif _packet(node) in (*SCORE_OPS, *VIEW_OPS):
            region.append(node)
            pending.extend(node.args)
    return region if qk is not None else None


def _layout_ops(node: Any) -> list[Any]:
    """The layout ops that make a product's operand from the value computed before them (not included): views,
    and a `split` of a packed projection's output (nanoGPT's qkv), so that the forward saves that output, of which
    q, k and v are views, rather than a copy of each."""
    ops = []
    while hasattr(node, "op") and node.op == "call_function":
        if _packet(node) in VIEW_OPS:
            ops.append(node)
            node = node.args[0]
        elif node.target is operator.getitem and _packet(node.args[0]) in SPLITS:
            ops += [node, node.args[0]]
            node = node.args[0].args[0]
        else:
            break
    return ops


def recompute_attention(joint: GraphModule, joint_inputs: Any, **kwargs: Any) -> tuple[GraphModule, GraphModule]:
    """AOTAutograd's default partition of a training step, with the forward ops of each attention (an SDPA call, or
    one written out around a softmax) recomputed in the backward rather than saved, as FlashAttention does: the
    forward then saves q, k and v, not the S x S probabilities, and is one flash-attention kernel; the backward's
    scores, probabilities and autograd's gradient math become FlashAttention-2's backward kernels
    (tinyton/rewrites/attention_gradients.py). An attention with dropout (random numbers a recomputation would draw
    again), or with heads narrower than DOT_MIN, keeps the default."""
    regions = _sdpa_regions(joint)
    covered = {n for nodes in regions for n in nodes}
    order = {n: i for i, n in enumerate(joint.graph.nodes)}
    for node in _forward_calls(joint):
        if _packet(node) is aten._softmax and node not in covered:
            region = _written_out_region(node)
            if region is not None and covered.isdisjoint(region):
                regions.append(sorted(set(region), key=order.__getitem__))
                covered.update(region)
    for graph_id, nodes in enumerate(regions):
        if any(torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()) for n in nodes):
            continue
        products = [n for n in nodes if n.target in (torch.ops.aten.bmm.default, torch.ops.aten.mm.default)]
        if not products or products[0].args[0].meta["val"].shape[-1] < DOT_MIN:
            continue  # heads narrower than a tensor-core tile: no flash kernels to recompute into (a Llama block of
            # 8-wide heads went from 38 to 43 backward launches recomputed)
        for node in nodes:
            node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            node.meta["ac_graph_id"] = graph_id
    return default_partition(joint, joint_inputs, **kwargs)
