"""The ATen -> array-program translation table: one rule per ATen overload (rules as data).

A rule takes the node's arguments with tensors as traced arrays (`Traced`) and returns traced arrays
(a tuple for ops with several results). `RULES` is the union of the per-concept tables, `CHECKED_RULES` its
variant for a user's graphs (`rules_for`); an op missing here, or a rule raising `Unsupported`, a CompilationError
or an AttributeError (a `tt.` builtin array programs do not have yet), runs in torch instead
(tinyton/torch/support.py).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from tinyton.torch import (
    conv_rules,
    distance_rules,
    elementwise_rules,
    index_rules,
    nn_rules,
    order_rules,
    scatter_rules,
    shape_rules,
)


def getitem(values: Any, index: int) -> Any:
    """One result of a multi-result op (`native_layer_norm`, `split`)."""
    return values[index]


RULES: dict[Any, Callable[..., Any]] = {
    **elementwise_rules.RULES,
    **shape_rules.RULES,
    **index_rules.RULES,
    **scatter_rules.RULES,
    **nn_rules.RULES,
    **order_rules.RULES,
    **conv_rules.RULES,
    **distance_rules.RULES,
    operator.getitem: getitem,
}
"""Every op's rule, as a backward graph translates it: its scatters and accumulations are autograd's gradients of
gathers and indexing, whose indices the forward has checked (`scatter_rules.checked_index`)."""

CHECKED_RULES: dict[Any, Callable[..., Any]] = {
    **RULES, **scatter_rules.CHECKED_RULES, **index_rules.CHECKED_RULES,
}
"""A forward or inference graph's rules: its scatters and accumulations are a user's calls, an index out of range
raises as eager's."""


def rules_for(graph: str) -> dict[Any, Callable[..., Any]]:
    """The rules translating the AOTAutograd graph named `graph` ("forward", "backward" or "inference")."""
    return RULES if graph == "backward" else CHECKED_RULES


aten = shape_rules.aten
ALIASING = frozenset({aten.view.default, aten.permute.default, aten.t.default, aten.transpose.int,
                      aten.expand.default, aten.unsqueeze.default, aten.squeeze.dims, aten.slice.Tensor,
                      aten.select.int, aten.diagonal.default})
"""ATen ops whose result shares its input's storage: a partition's output made by a chain of them is made by
torch (tinyton/torch/compiled_partition.py)."""

VIEWS = frozenset(
    RULES[op] for op in (*ALIASING, aten.clone.default, aten.split_with_sizes.default)
) | {getitem}
"""Rules of ops that compute nothing (views and copies): a group of only these stays in torch."""
