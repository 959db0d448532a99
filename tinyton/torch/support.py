"""Which nodes of an ATen graph tinyton runs, and why the others run in torch.

A node is supported when its rule traces, on arrays of the shapes and dtypes torch's trace gave its inputs,
to a result of torch's shape (tinyton/torch/interpret.py), and every tensor it touches is on a device
tinyton drives (the CPU: the simulator, or copies to the GPU; any CUDA device of the host when tinyton's
driver has a GPU) in a dtype array programs hold. The trial trace is thrown away; it only answers "would it work".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch.fx import Node

from tinyton.dialects import tta
from tinyton.frontend.promotion import element_of
from tinyton.frontend.traced import Traced, Tracer
from tinyton.runtime import driver
from tinyton.torch.common import Unsupported, array_dtype, optimization_hint
from tinyton.torch.interpret import run_node, static_shape
from tinyton.torch.rules import RULES


def device_reason(device: torch.device) -> str | None:
    """Why tinyton cannot run on tensors of `device` (None: it can)."""
    if device.type == "cpu":
        return None
    if device.type == "cuda":
        if not driver.is_available():
            return f"tensors on {device} but tinyton's driver sees no GPU"
        if device.index is not None and device.index >= driver.device_count():
            return f"tensors on {device}: tinyton's driver sees {driver.device_count()} GPU(s)"
        return None
    return f"tensors on {device}: tinyton runs CPU (simulator) and CUDA tensors"


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def is_host_value(node: Node) -> bool:
    """Nodes computing Python numbers (symbolic sizes): they run in Python, no kernel involved."""
    return node.op == "call_function" and not _tensors(node.meta.get("val"))


def _stand_in(tracer: Tracer, value: Any) -> Any:
    """What the trial trace passes for an input's value: a traced array of its shape and dtype, sizes as ints
    (and floats computed from sizes as floats)."""
    if isinstance(value, torch.Tensor):
        element = element_of(array_dtype(value.dtype))
        arg = tracer.block.insert_arg(tta.array_type(element, static_shape(value)), len(tracer.block.args))
        return Traced(tracer, arg)
    if isinstance(value, (tuple, list)):
        return type(value)(_stand_in(tracer, v) for v in value)
    if isinstance(value, torch.SymInt):
        return optimization_hint(value)
    if isinstance(value, torch.SymFloat):  # a dynamic graph's factor of sizes (a mean's 1 / (H * W))
        return float(value.node.hint)
    return value


aten = torch.ops.aten

INT64_SAFE = frozenset({
    aten.embedding.default, aten.embedding_dense_backward.default, aten.gather.default, aten.scatter.value,
    aten.scatter.src, aten.index.Tensor, aten.index_put.default, aten.where.self, aten.arange.default,
    aten.arange.start, aten.arange.start_step, aten._to_copy.default, aten.view.default, aten._unsafe_view.default,
    aten.reshape.default, aten.permute.default, aten.t.default, aten.transpose.int, aten.expand.default,
    aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.clone.default,
    aten.alias.default, aten.slice.Tensor, aten.select.int, aten.cat.default, aten.full.default,
    aten.full_like.default, aten.scalar_tensor.default, aten.empty.memory_format, aten.clamp.default,
    aten.lift_fresh_copy.default, aten.argmax.default, aten.argmin.default, aten.max.dim, aten.min.dim,
    *(getattr(getattr(aten, c), k) for c in ("eq", "ne", "lt", "le", "gt", "ge") for k in ("Tensor", "Scalar")),
})
"""Ops that only move, select or compare int64 values (indices, positions, targets) or make indices (argmax):
exact on int64 held as int32 (array programs without int64). Arithmetic on int64 could overflow int32, so it runs in torch."""


ARANGES = frozenset({aten.arange.default, aten.arange.start, aten.arange.start_step})


def _from_aranges(node: Node, depth: int = 8) -> bool:
    """Whether `node` is an arange, or moves or adds aranges (masks' index arithmetic): bounded by sizes."""
    if node.target in ARANGES:
        return True
    if depth == 0 or node.op != "call_function" or not node.all_input_nodes:
        return False
    return node.target in RULES and all(_from_aranges(n, depth - 1) for n in node.all_input_nodes)


def _int64_reason(node: Node, tensors: list[torch.Tensor]) -> str | None:
    """Why int64 tensors keep this node in torch (None: they do not, or there are none)."""
    if array_dtype(torch.int64) != np.int32 or not any(t.dtype == torch.int64 for t in tensors):
        return None
    if node.target in INT64_SAFE or all(_from_aranges(n) for n in node.all_input_nodes):
        return None
    inputs = [t for n in node.all_input_nodes for t in _tensors(n.meta.get("val"))]
    if node.target in (aten.sum.dim_IntList, aten.sum.default) and all(t.dtype == torch.bool for t in inputs):
        return None  # a count of bools: exact in int32
    return "int64 arithmetic (array programs hold int64 as int32)"


def unsupported_reason(node: Node, rules: Mapping[Any, Callable[..., Any]]) -> str | None:
    """Why tinyton cannot run this node through `rules` (its graph's) (None: it can)."""
    if node.target not in rules:
        return "no tinyton rule"
    try:
        tensors = _tensors(node.meta.get("val")) + [t for n in node.all_input_nodes for t in _tensors(n.meta.get("val"))]
        for t in tensors:
            reason = device_reason(t.device)
            if reason:
                return reason
            array_dtype(t.dtype)
        reason = _int64_reason(node, tensors)
        if reason:
            return reason
        tracer = Tracer()
        with tracer.active():
            env = {n: _stand_in(tracer, n.meta.get("val")) for n in node.all_input_nodes}
            run_node(node, env, rules)
    except Unsupported as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - a probe: whatever a rule raises, the op runs in torch
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None
