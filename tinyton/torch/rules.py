"""The ATen -> array-program translation table: one rule per ATen overload (rules as data).

A rule takes the node's arguments with tensors as traced arrays (`Traced`) and returns traced arrays
(a tuple for ops with several results). `RULES` is the union of the per-concept tables; an op missing here,
or a rule raising `Unsupported`, a CompilationError or an AttributeError (a `tt.` builtin array programs do
not have yet), runs in torch instead (tinyton/torch/support.py).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from tinyton.torch import elementwise_rules, nn_rules, shape_rules


def getitem(values: Any, index: int) -> Any:
    """One result of a multi-result op (`native_layer_norm`, `split`)."""
    return values[index]


RULES: dict[Any, Callable[..., Any]] = {
    **elementwise_rules.RULES,
    **shape_rules.RULES,
    **nn_rules.RULES,
    operator.getitem: getitem,
}

VIEWS = frozenset(
    shape_rules.RULES[op] for op in (
        shape_rules.aten.view.default, shape_rules.aten.permute.default, shape_rules.aten.t.default,
        shape_rules.aten.transpose.int, shape_rules.aten.expand.default, shape_rules.aten.unsqueeze.default,
        shape_rules.aten.squeeze.dims, shape_rules.aten.clone.default, shape_rules.aten.slice.Tensor,
        shape_rules.aten.select.int, shape_rules.aten.split_with_sizes.default,
    )
) | {getitem}
"""Rules of ops that compute nothing (views and copies): a group of only these stays in torch."""
