"""Which nodes of an ATen graph tinyton runs, and why the others run in torch.

A node is supported when its rule traces, on arrays of the shapes and dtypes torch's trace gave its inputs,
to a result of torch's shape (tinyton/torch/interpret.py), and every tensor it touches is on a device
tinyton drives (the CPU: the simulator, or copies to the GPU; CUDA device 0 when tinyton's driver has a
GPU) in a dtype array programs hold. The trial trace is thrown away; it only answers "would it work".
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node
from torch.fx.experimental.symbolic_shapes import optimization_hint

from tinyton.dialects import tta
from tinyton.frontend.promotion import element_of
from tinyton.frontend.traced import Traced, Tracer
from tinyton.runtime import driver
from tinyton.torch.common import Unsupported, array_dtype
from tinyton.torch.interpret import run_node, static_shape
from tinyton.torch.rules import RULES


def device_reason(device: torch.device) -> str | None:
    """Why tinyton cannot run on tensors of `device` (None: it can)."""
    if device.type == "cpu":
        return None
    if device.type == "cuda":
        if device.index not in (None, 0):
            return f"tensors on {device}: tinyton drives CUDA device 0"
        return None if driver.is_available() else f"tensors on {device} but tinyton's driver sees no GPU"
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
    """What the trial trace passes for an input's value: a traced array of its shape and dtype, sizes as ints."""
    if isinstance(value, torch.Tensor):
        element = element_of(array_dtype(value.dtype))
        arg = tracer.block.insert_arg(tta.array_type(element, static_shape(value)), len(tracer.block.args))
        return Traced(tracer, arg)
    if isinstance(value, (tuple, list)):
        return type(value)(_stand_in(tracer, v) for v in value)
    if isinstance(value, torch.SymInt):
        return optimization_hint(value)
    return value


def unsupported_reason(node: Node) -> str | None:
    """Why tinyton cannot run this node (None: it can)."""
    if node.target not in RULES:
        return "no tinyton rule"
    try:
        for t in _tensors(node.meta.get("val")) + [t for n in node.all_input_nodes for t in _tensors(n.meta.get("val"))]:
            reason = device_reason(t.device)
            if reason:
                return reason
            array_dtype(t.dtype)
        tracer = Tracer()
        with tracer.active():
            env = {n: _stand_in(tracer, n.meta.get("val")) for n in node.all_input_nodes}
            run_node(node, env)
    except Unsupported as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - a probe: whatever a rule raises, the op runs in torch
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None
