"""One tinyton partition of an ATen graph at run time: traced, fused and compiled per call signature.

The signature is what the traced program is specialised on: each tensor's shape, dtype and device, and the
value of each int (symbolic sizes of a dynamic graph), so a new batch size or sequence length compiles a new
variant and nothing stale is reused. int64 inputs are passed as int32 where array programs have no int64,
and results are given back in torch's dtypes. If tinyton cannot compile or run a signature (a
CompilationError from fusion or codegen), its calls run the partition in torch, and explain says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.fx import GraphModule

from tinyton.compiler import build_program
from tinyton.frontend.tracing import trace
from tinyton.runtime.torch_interop import from_host
from tinyton.torch.common import array_dtype
from tinyton.torch.interpret import run_graph
from tinyton.torch.report import Group, Report

_MISSING = object()


def _key(args: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((a.shape, a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


class CompiledPartition(torch.nn.Module):
    """Calls the partition `gm` as tinyton array programs (one per signature), or in torch where tinyton cannot."""

    def __init__(self, gm: GraphModule, group: Group, report: Report) -> None:
        super().__init__()
        self.gm, self.group, self.report = gm, group, report
        output = next(n for n in gm.graph.nodes if n.op == "output")
        self.returns_tuple = isinstance(output.args[0], (tuple, list))
        outputs = output.args[0] if self.returns_tuple else (output.args[0],)
        self.expected = [o.meta.get("val") for o in outputs]
        self.programs: dict[tuple[Any, ...], Any] = {}

    def forward(self, *args: Any) -> Any:
        key = _key(args)
        program = self.programs.get(key, _MISSING)
        if program is _MISSING:
            return self._first_call(key, args)
        return self.gm(*args) if program is None else self._run(program, args)

    def _first_call(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        """Compile the signature and run it; on failure remember to run it in torch, and say why."""
        try:
            inputs = self._narrowed(args)
            graph = trace(self._program, inputs, name="torch_partition")
            program = build_program(graph, "torch_partition", [i for i, a in enumerate(inputs)
                                                              if isinstance(a, torch.Tensor)])
            result = self._run(program, args)
        except Exception as e:  # noqa: BLE001 - a compiler failure must not fail the model: torch runs it
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            for op in self.group.ops:
                self.report.fall_back(op, f"its group did not compile: {reason}")
            self.programs[key] = None
            return self.gm(*args)
        self.programs[key] = self.group.programs[key] = program
        return result

    def _program(self, *args: Any) -> tuple[Any, ...]:
        return run_graph(self.gm, args)

    @staticmethod
    def _narrowed(args: Sequence[Any]) -> list[Any]:
        """int64 tensors as int32 where array programs have no int64 (indices, positions, token ids); CPU
        tensors (scalars torch keeps on the host) on the GPU with CUDA ones, since a program runs on one device."""
        narrow = array_dtype(torch.int64) != np.int64
        device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.is_cuda), None)
        return [a.to(device=device or a.device, dtype=torch.int32 if narrow and a.dtype == torch.int64 else a.dtype)
                if isinstance(a, torch.Tensor) else a for a in args]

    def _run(self, program: Any, args: Sequence[Any]) -> Any:
        self.group.last = program
        results = program(*self._narrowed(args))
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        results = [_fresh(_as_expected(r, e), inputs) for r, e in zip(results, self.expected)]
        return tuple(results) if self.returns_tuple else results[0]


def _fresh(result: torch.Tensor, inputs: set[int]) -> torch.Tensor:
    """`result`, copied if it is an input's memory: a program may return an input (`clone` is the identity in
    array programs, a contiguous reshape shares its buffer), but the graph's outputs are new tensors."""
    return result.clone() if result.untyped_storage().data_ptr() in inputs else result


def _as_expected(result: Any, expected: Any) -> Any:
    """A program's result as the tensor torch's graph expects: a torch tensor on its device, in its dtype."""
    if isinstance(result, np.ndarray):
        result = from_host(np.ascontiguousarray(result))
    if isinstance(expected, torch.Tensor):
        if result.device != expected.device:
            result = result.to(expected.device)
        if result.dtype != expected.dtype:
            result = result.to(expected.dtype)
    return result
