"""What a training step keeps of its attentions for the backward: q, k, v, the output and each row's logsumexp, as
FlashAttention does, never the S x S probabilities.

AOTAutograd's default partition of the joint forward-and-backward graph, with each attention's forward ops (an SDPA
call's `sdpa_math`, by dynamo's source records, or an attention written out around a softmax, found by its shape:
`q @ kᵀ`, score steps, softmax, `@ v`) marked to be recomputed in the backward. Before partitioning, the joint graph
is rewritten where autograd's math does not say what FlashAttention-2 keeps (`_keep_statistics`):

    p = softmax(s)            ->  lse = m + log(sum(exp(s - m)))  (f32, saved)     p = exp(s - lse)  (recomputed)
    delta = rowsum(dp * p)    ->  delta = rowsum(do * o)          (o = p @ v, saved)

The forward is then one flash-attention kernel that stores o and lse, and the backward's recomputed scores,
`exp(s - lse)` and gradient math are FlashAttention-2's delta, dk/dv and dq kernels (tinyton/analysis/
attention_backward.py with the logsumexp given): no second pass over the keys for the forward's statistics. An
attention with dropout (random numbers a recomputation would draw again), or with heads narrower than DOT_MIN,
keeps the default partition.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch._functorch.partitioners import default_partition
from torch._guards import detect_fake_mode
from torch.fx import Graph, GraphModule, Node
from torch.utils.checkpoint import CheckpointPolicy

from tinyton.dialects.tt import DOT_MIN
from tinyton.torch.attention import SDPA
from tinyton.torch.graph_rewrites import RESHAPES, swaps_last_two, unbatched

aten = torch.ops.aten
PRODUCTS = (aten.bmm, aten.mm)
VIEW_OPS = (aten.view, aten._unsafe_view, aten.expand, aten.clone, aten.permute, aten.transpose, aten.unsqueeze,
            aten.squeeze, aten.alias, aten.slice, aten._to_copy)
"""Layout ops between the operands of a written-out attention and its products (and casts): free to recompute."""
SPLITS = (aten.split, aten.split_with_sizes, aten.unbind)
COPIES = (aten.clone, aten._to_copy)
"""The layout ops among VIEW_OPS that copy."""
SCORE_OPS = (aten.mul, aten.div, aten.add, aten.sub, aten.neg, aten.where, aten.masked_fill, aten.full,
             aten.scalar_tensor, aten.arange, aten.le, aten.lt, aten.ge, aten.gt, aten.eq, aten.ne, aten.logical_and,
             aten.logical_or, aten.logical_not, aten.bitwise_not, aten.bitwise_and, aten.bitwise_or)
"""The steps between `q @ kᵀ` and the softmax (scale, bias, masks) and the index arithmetic of causal masks."""


def recompute_attention(joint: GraphModule, joint_inputs: Any, **kwargs: Any) -> tuple[GraphModule, GraphModule]:
    """The partition function of the torch backend (module docstring)."""
    fake_mode = detect_fake_mode(joint_inputs)
    for graph_id, nodes in enumerate(_regions(joint)):
        if any(torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()) for n in nodes):
            continue
        products = [n for n in nodes if _packet(n) in PRODUCTS]
        if not products or products[0].args[0].meta["val"].shape[-1] < DOT_MIN:
            continue  # heads narrower than a tensor-core tile: no flash kernels to recompute into (a Llama block of
            # 8-wide heads went from 38 to 43 backward launches recomputed)
        kept = _keep_statistics(joint.graph, nodes, fake_mode) if fake_mode is not None else {}
        for node in [*nodes, *kept]:
            node.meta["recompute"] = kept.get(node, CheckpointPolicy.MUST_RECOMPUTE)
            node.meta["ac_graph_id"] = graph_id
    joint.graph.eliminate_dead_code()
    joint.recompile()
    return default_partition(joint, joint_inputs, **kwargs)


# ---- the attentions of a joint graph -----------------------------------------------------------------------------
def _forward_calls(joint: GraphModule) -> list[Node]:
    return [n for n in joint.graph.nodes if n.op == "call_function" and n.meta.get("partitioner_tag") != "is_backward"]


def _packet(node: Any) -> Any:
    return getattr(getattr(node, "target", None), "overloadpacket", None)


def _regions(joint: GraphModule) -> list[list[Node]]:
    """The forward ops of each attention, in graph order: SDPA calls, then attentions written out."""
    regions: dict[str, list[Node]] = {}
    for node in _forward_calls(joint):
        calls = [name for name, target in node.meta.get("source_fn_stack") or [] if target is SDPA]
        if calls:
            regions.setdefault(calls[-1], []).append(node)
    order = {n: i for i, n in enumerate(joint.graph.nodes)}
    found = [sorted(_with_operand_layouts(nodes), key=order.__getitem__) for nodes in regions.values()]
    covered = {n for nodes in found for n in nodes}
    for node in _forward_calls(joint):
        if _packet(node) is aten._softmax and node not in covered:
            region = _written_out_region(node)
            if region is not None and covered.isdisjoint(region):
                found.append(sorted(set(region), key=order.__getitem__))
                covered.update(region)
    return found


def _with_operand_layouts(nodes: list[Node]) -> list[Node]:
    """An SDPA call's ops and the layout ops before it that make its q, k and v (`_layout_ops`: nanoGPT's `split` of
    the qkv projection, `view(...).transpose(1, 2)`), so that the forward saves the projection they are views of, not
    a copy of each (4 copy kernels a block when it did). A copy among them (k and v repeated by hand for grouped
    heads: `expand`, then `reshape`'s `clone`) is kept as the forward made it, not made again in the backward."""
    region, inside = list(nodes), set(nodes)
    for node in nodes:
        for operand in node.all_input_nodes:
            if operand not in inside:
                views = _layout_ops(operand)
                copy = next((i for i, op in enumerate(views) if _packet(op) in COPIES), len(views))
                added = [op for op in views[:copy] if op not in inside]
                region += added
                inside.update(added)
    return region


def _probability_product(softmax: Node) -> tuple[Node, list[Node]] | None:
    """`p @ v` of the probabilities `softmax`, through layout ops (and the `alias` autograd keeps of them), with
    those ops; None when `p` goes anywhere else first (dropout)."""
    ops, p = [], softmax
    while True:
        ops += [u for u in p.users if _packet(u) is aten.alias]
        users = [u for u in p.users if _packet(u) is not aten.alias]
        if len(users) != 1 or _packet(users[0]) not in VIEW_OPS:
            break
        p = users[0]
        ops.append(p)
    pv = next((u for u in p.users if _packet(u) in PRODUCTS and u.args[0] is p), None)
    return (pv, ops) if pv is not None else None


def _written_out_region(softmax: Node) -> list[Node] | None:
    """The forward ops of an attention written out by hand around `softmax` (nanoGPT's `(q @ kᵀ) * scale`,
    `masked_fill`, `softmax`, `@ v`): the score steps and mask arithmetic back to `q @ kᵀ`, the product of the
    probabilities with v, and the layout ops of both products' operands; None when the softmax is not between two
    products that way."""
    found = _probability_product(softmax)
    if found is None:
        return None
    pv, between = found
    region = [softmax, *between, pv, *_layout_ops(pv.args[1])]
    pending, qk = [softmax.args[0]], None
    while pending:
        node = pending.pop()
        if not isinstance(node, Node) or node.op != "call_function" or node in region:
            continue
        if _packet(node) in PRODUCTS and qk is None:
            qk = node
            region += [qk, *(op for a in qk.args for op in _layout_ops(a))]
        elif _packet(node) in (*SCORE_OPS, *VIEW_OPS):
            region.append(node)
            pending.extend(node.args)
    return region if qk is not None else None


def _layout_ops(node: Any) -> list[Node]:
    """The layout ops that make a product's operand from the value computed before them (not included): views,
    and a `split` of a packed projection's output (nanoGPT's qkv), so that the forward saves that output, of which
    q, k and v are views, rather than a copy of each."""
    ops = []
    while isinstance(node, Node) and node.op == "call_function":
        if _packet(node) in VIEW_OPS:
            ops.append(node)
            node = node.args[0]
        elif node.target is operator.getitem and _packet(node.args[0]) in SPLITS:
            ops += [node, node.args[0]]
            node = node.args[0].args[0]
        else:
            break
    return ops


# ---- what the forward keeps -----------------------------------------------------------------------------------------
def _keep_statistics(graph: Graph, nodes: Sequence[Node], fake_mode: Any) -> dict[Node, CheckpointPolicy]:
    """Rewrite one attention's softmax and delta (module docstring) in the joint graph; the new forward nodes with
    their policy (the logsumexp and `p @ v` as the model shapes it saved, the rest recomputed). Nothing changes (an
    empty dict) where the graph is not shaped as expected."""
    softmaxes = [n for n in nodes if _packet(n) is aten._softmax]
    found = _probability_product(softmaxes[0]) if len(softmaxes) == 1 else None
    if found is None:
        return {}
    softmax, (pv, between) = softmaxes[0], found
    out = next((u for u in pv.users if u.target in RESHAPES), pv)  # the product as the model shaped it
    delta, do = _delta(graph, pv, between, softmax)
    if delta is None or do is None or do.meta["val"].shape != out.meta["val"].shape:
        return {}
    build = _Builder(graph, fake_mode)
    with graph.inserting_before(delta):
        product = build(aten.mul.Tensor, do, out, like=delta)
        new_delta = build(aten.sum.dim_IntList, product, [-1], True, like=delta)
    if new_delta.meta["val"].shape != delta.meta["val"].shape:
        return {}
    delta.replace_all_uses_with(new_delta)
    s, dtype = softmax.args[0], softmax.meta["val"].dtype
    with graph.inserting_before(softmax):
        s32 = build(aten._to_copy.default, s, dtype=torch.float32, like=softmax)
        m = build(aten.amax.default, s32, [-1], True, like=softmax)
        exps = build(aten.exp.default, build(aten.sub.Tensor, s32, m, like=softmax), like=softmax)
        lse = build(aten.add.Tensor, m, build(aten.log.default, build(aten.sum.dim_IntList, exps, [-1], True,
                                                                            like=softmax), like=softmax), like=softmax)
        p = build(aten.exp.default, build(aten.sub.Tensor, s32, lse, like=softmax), like=softmax)
        if dtype != torch.float32:
            p = build(aten._to_copy.default, p, dtype=dtype, like=softmax)
    softmax.replace_all_uses_with(p)
    graph.erase_node(softmax)
    policies = {node: CheckpointPolicy.MUST_RECOMPUTE for node in build.forward}
    policies.update({lse: CheckpointPolicy.MUST_SAVE, out: CheckpointPolicy.MUST_SAVE})
    return policies


def _delta(graph: Graph, pv: Node, between: Sequence[Node], softmax: Node) -> tuple[Node | None, Node | None]:
    """autograd's `rowsum(dp * p)` of this attention in the backward, and `do`, the gradient of `p @ v` as the
    model shaped it (the operand of `dp = do @ vᵀ` before torch's batched-matmul reshapes)."""
    v = pv.args[1]
    dp = next((u for t in v.users if swaps_last_two(t) for u in t.users
               if _packet(u) in PRODUCTS and u.args[1] is t), None)
    if dp is None:
        return None, None
    probabilities = {softmax, *between}
    for node in _through_reshapes(dp):
        for mul in node.users:
            if _packet(mul) is not aten.mul or not any(_strip_alias(a) in probabilities for a in mul.args):
                continue
            rowsum = next((u for u in mul.users if u.target is aten.sum.dim_IntList and u.args[2:3] == (True,)
                           and list(u.args[1]) in ([-1], [len(mul.meta["val"].shape) - 1])), None)
            if rowsum is not None:
                return rowsum, unbatched(dp.args[0], graph)
    return None, None


def _through_reshapes(node: Node) -> list[Node]:
    found = [node]
    while len(node.users) == 1 and (node := next(iter(node.users))).target in RESHAPES:
        found.append(node)
    return found


def _strip_alias(node: Any) -> Any:
    while isinstance(node, Node) and _packet(node) is aten.alias:
        node = node.args[0]
    return node


class _Builder:
    """New call nodes of the joint graph with their fake values (the partitioner sizes what it saves by them)."""

    def __init__(self, graph: Graph, fake_mode: Any) -> None:
        self.graph, self.fake_mode, self.forward = graph, fake_mode, []

    def __call__(self, target: Any, *args: Any, like: Node, **kwargs: Any) -> Node:
        node = self.graph.call_function(target, args, kwargs)
        fake = [a.meta["val"] if isinstance(a, Node) else a for a in args]
        with self.fake_mode:
            node.meta["val"] = target(*fake, **kwargs)
        for key in ("partitioner_tag", "source_fn_stack", "stack_trace"):
            if key in like.meta:
                node.meta[key] = like.meta[key]
        if like.meta.get("partitioner_tag") != "is_backward":
            self.forward.append(node)
        return node
