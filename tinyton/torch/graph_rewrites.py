"""Rewrites of the ATen graph before it is partitioned: undo what torch's matmul decomposition does to
batched products, so that tinyton sees the product the user wrote, and transpose products' operands rather
than their results.

torch lowers `a @ b` on 4-D (or broadcast) operands to `expand`, `clone` where the expansion is not a view,
a reshape to 3-D, `bmm`, and a reshape back. In tinyton that would be copies, a batched product over merged
heads and a reshape ending the kernel before the scores' scale, mask and softmax: the flash-attention rewrite
(tinyton/analysis/attention.py) would not see `softmax(q @ kᵀ * scale) @ v`. `batched_matmuls` replaces the
chain by one `aten.matmul` of the original operands (NumPy's broadcasting matmul, `tt.matmul`).
"""

from __future__ import annotations

import torch
from typing import Any

from torch.fx import GraphModule, Node

from tinyton.torch.common import optimization_hint

aten = torch.ops.aten

RESHAPES = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _shape(node: Node) -> tuple[int, ...] | None:
    """The node's shape, a symbolic size (dynamo marks sizes dynamic once a frame has seen two) as its hint: the
    rewrites match products whose shapes agree, which they do for every size (tinyton compiles each call's sizes)."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    return tuple(optimization_hint(d) for d in value.shape)


def unbatched(operand: Node, graph: torch.fx.Graph) -> Node:
    """The operand before the reshape to 3-D (and the clone and expand before it), or itself; a 3-D operand
    transposed after that reshape (autograd's `pᵀ @ do`, `qᵀ @ ds`) as the transpose of that operand's last two
    axes (a transpose that undoes one the operand already had: the operand before it)."""
    if swaps_last_two(operand) and len(_shape(operand) or ()) == 3:
        source = unbatched(operand.args[0], graph)
        return operand if source is operand.args[0] else _transposed(source, graph)
    if not (isinstance(operand, Node) and operand.target in RESHAPES):
        return operand
    source = operand.args[0]
    if isinstance(source, Node) and source.target is aten.clone.default:
        source = source.args[0]
    if isinstance(source, Node) and source.target is aten.expand.default:
        source = source.args[0]
    return source


def swaps_last_two(node: Any) -> bool:
    """A transpose (or permute) of exactly the last two axes."""
    if not (isinstance(node, Node) and node.op == "call_function" and (shape := _shape(node)) is not None):
        return False
    n = len(shape)
    if node.target is aten.permute.default:
        return [d % n for d in node.args[1]] == [*range(n - 2), n - 1, n - 2]
    if node.target is aten.transpose.int:
        return sorted(d % n for d in node.args[1:3]) == [n - 2, n - 1]
    return node.target is aten.t.default


def _broadcast_product(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape of NumPy's `a @ b` for operands of rank >= 2 (None if they do not multiply)."""
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    try:
        batch = torch.broadcast_shapes(a[:-2], b[:-2])
    except RuntimeError:
        return None
    return (*batch, a[-2], b[-1])


def batched_matmuls(gm: GraphModule) -> None:
    """`reshape(bmm(reshape(expand(a)), reshape(expand(b))))` -> `matmul(a, b)` where the shapes agree (in place)."""
    for node in list(gm.graph.nodes):
        if node.target not in RESHAPES or not isinstance(node.args[0], Node) or node.args[0].target is not aten.bmm.default:
            continue
        bmm = node.args[0]
        a, b = (unbatched(x, gm.graph) for x in bmm.args)
        if (a, b) == tuple(bmm.args):
            continue
        shapes = _shape(a), _shape(b), _shape(node)
        if None in shapes or _broadcast_product(shapes[0], shapes[1]) != shapes[2]:
            continue
        with gm.graph.inserting_before(node):
            product = gm.graph.call_function(aten.matmul.default, (a, b))
        product.meta = dict(node.meta)
        node.replace_all_uses_with(product)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _transposed(x: Node, graph: torch.fx.Graph) -> Node:
    """`x` with its last two axes swapped: the operand of the transpose `x` is, else a new transpose right after `x`."""
    if swaps_last_two(x):
        return x.args[0]
    with graph.inserting_after(x):
        node = graph.call_function(aten.transpose.int, (x, -2, -1))
    node.meta["val"] = x.meta["val"].transpose(-2, -1)
    return node


def _batch_sum(node: Node) -> bool:
    """A sum over batch axes only (not the last two), used once: grouped-query heads' gradients summed over the group."""
    if node.target is not aten.sum.dim_IntList or len(node.users) != 1 or (shape := _shape(node.args[0])) is None:
        return False
    n = len(shape)
    return all(d % n < n - 2 for d in node.args[1])


def transposed_products(gm: GraphModule) -> None:
    """`(a @ b)ᵀ` -> `bᵀ @ aᵀ` for products used only transposed (a Linear's weight gradient; autograd's
    `(qᵀ @ ds)ᵀ`, attention's key gradient, maybe summed over a group of heads first): the operands' transposes
    are views the product's loads read (a transpose of a transpose is its operand), the result's would be a copy
    kernel (in place)."""
    for node in list(gm.graph.nodes):
        if not swaps_last_two(node) or not isinstance(node.args[0], Node):
            continue
        total = node.args[0] if _batch_sum(node.args[0]) else None
        mm = total.args[0] if total is not None else node.args[0]
        if not isinstance(mm, Node) or mm.target not in (aten.mm.default, aten.matmul.default) or len(mm.users) != 1:
            continue
        a, b = mm.args
        if _shape(a) is None or _shape(b) is None or min(len(_shape(a)), len(_shape(b))) < 2:
            continue
        bt, at = _transposed(b, gm.graph), _transposed(a, gm.graph)
        with gm.graph.inserting_before(node):
            product = gm.graph.call_function(mm.target, (bt, at))
            if total is not None:
                product.meta["val"] = mm.meta["val"].transpose(-2, -1)
                product = gm.graph.call_function(aten.sum.dim_IntList, (product, *total.args[1:]), dict(total.kwargs))
        product.meta = dict(node.meta)
        node.replace_all_uses_with(product)
    gm.graph.eliminate_dead_code()
    gm.recompile()
