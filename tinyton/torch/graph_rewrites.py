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
from torch.fx import GraphModule, Node

aten = torch.ops.aten

RESHAPES = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _shape(node: Node) -> tuple[int, ...] | None:
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(value.shape)


def _unbatched(operand: Node) -> Node:
    """The operand before the reshape to 3-D (and the clone and expand before it), or itself."""
    if not (isinstance(operand, Node) and operand.target in RESHAPES):
        return operand
    source = operand.args[0]
    if isinstance(source, Node) and source.target is aten.clone.default:
        source = source.args[0]
    if isinstance(source, Node) and source.target is aten.expand.default:
        source = source.args[0]
    return source


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
        a, b = (_unbatched(x) for x in bmm.args)
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


def _is_transpose_2d(node: Node) -> bool:
    return node.op == "call_function" and (
        node.target is aten.t.default
        or (node.target is aten.permute.default and list(node.args[1]) == [1, 0])
        or (node.target is aten.transpose.int and sorted(d % 2 for d in node.args[1:3]) == [0, 1])
    )


def transposed_products(gm: GraphModule) -> None:
    """`(a @ b)ᵀ` -> `bᵀ @ aᵀ` for 2-D products used only transposed (a Linear's weight gradient): the
    operands' transposes are views the product's loads read, the result's would be a copy kernel (in place)."""
    for node in list(gm.graph.nodes):
        if not _is_transpose_2d(node) or not isinstance(node.args[0], Node):
            continue
        mm = node.args[0]
        if mm.target is not aten.mm.default or len(mm.users) != 1 or _shape(node) is None:
            continue
        a, b = mm.args
        with gm.graph.inserting_before(node):
            bt, at = (gm.graph.call_function(aten.t.default, (x,)) for x in (b, a))
            product = gm.graph.call_function(aten.mm.default, (bt, at))
        for x, t in ((b, bt), (a, at)):
            t.meta["val"] = x.meta["val"].t()
        product.meta = dict(node.meta)
        node.replace_all_uses_with(product)
    gm.graph.eliminate_dead_code()
    gm.recompile()
