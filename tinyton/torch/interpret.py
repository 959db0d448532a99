"""Run an ATen FX graph on traced arrays: each node through its rule, its result cast to torch's dtype.

torch's own trace of the graph (each node's `meta["val"]`, a fake tensor) is the authority on result
dtypes: NumPy's promotion inside a rule only decides the arithmetic's precision, and the result is cast to
the dtype torch gives (int64 held as int32, tinyton/torch/common.py). A result whose shape differs from
torch's is refused, never returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported, array_dtype, optimization_hint


def op_name(node: Node) -> str:
    """`aten.mm.default`: how explain names a node's op."""
    target = node.target
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def static_shape(value: torch.Tensor) -> tuple[int, ...]:
    """A (fake) tensor's shape, symbolic sizes replaced by the values they were traced with."""
    return tuple(optimization_hint(d) for d in value.shape)


def conform(result: Any, expected: Any) -> Any:
    """`result` with torch's dtype for this node; Unsupported when its shape is not torch's."""
    if isinstance(expected, (tuple, list)):
        return type(result)(conform(r, e) for r, e in zip(result, expected)) if result is not None else result
    if not isinstance(expected, torch.Tensor):
        return result
    if not isinstance(result, Traced):
        result = tt.full(static_shape(expected), result, array_dtype(expected.dtype))
    shape = tuple(expected.shape)
    if all(isinstance(d, int) for d in shape) and result.shape != shape:
        raise Unsupported(f"tinyton's result has shape {result.shape}, torch's {shape}")
    dtype = array_dtype(expected.dtype)
    return result if result.dtype == dtype else result.astype(dtype)


def run_node(node: Node, env: dict[Node, Any], rules: Mapping[Any, Callable[..., Any]]) -> Any:
    """The node's rule (from `rules`, the graph's: tinyton/torch/rules.py, `rules_for`) applied to its (traced)
    arguments."""
    rule = rules.get(node.target)
    if rule is None:
        raise Unsupported("tinyton has no rule for this op")
    args = torch.fx.node.map_arg(node.args, env.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
    return conform(rule(*args, **kwargs), node.meta.get("val"))


def run_graph(gm: GraphModule, rules: Mapping[Any, Callable[..., Any]], args: Sequence[Any],
              nodes: Sequence[Node] | None = None) -> tuple[Any, ...]:
    """The graph's outputs for traced (and int) inputs through `rules`, in the order of its output node, or the
    values of `nodes`."""
    env: dict[Node, Any] = {}
    inputs = iter(args)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(inputs)
        elif node.op == "call_function":
            env[node] = run_node(node, env, rules)
        elif node.op == "output":
            if nodes is not None:
                return tuple(env[n] for n in nodes)
            outputs = torch.fx.node.map_arg(node.args[0], env.__getitem__)
            return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
    raise Unsupported("graph without an output")
