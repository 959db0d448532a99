"""`tinyton.torch.explain(fn_or_module, *inputs)`: what the backend does with a model, from one call.

It compiles `fn_or_module` with the tinyton backend, calls it once on `inputs`, and reports the ATen ops
that ran in torch (each with its reason), the tinyton kernels one forward call launches, and per tinyton
group its ATen ops and the kernels they became: each launch's kind, ops, name, programs and tiles.
"""

from __future__ import annotations

import sys

from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

import torch

from tinyton.dialects import tta
from tinyton.torch.backend import reported_backend
from tinyton.torch.report import Report

FORWARD_GRAPHS = ("forward", "inference")


def launched_kernels(program: Any) -> list[str]:
    """One line per kernel launch of a compiled program: its kind and ops, then its name (as profilers show
    it), its programs and warps and the blocks its lowering chose (a matmul's BM x BN x BK tile, stages and
    K ranges; a row kernel's rows and block), so a launch that leaves the GPU idle shows in the summary."""
    lines = []
    for step in program.steps:
        launch = step.launch
        ops = [o.name.removeprefix("tta.") for f in launch.fusions for o in f.body.block.ops
               if not isinstance(o, tta.YieldOp)]
        parts = getattr(launch, "parts", (launch,))  # a KernelGroup's kernels, each with its tiles
        notes = [f"{key} {value}" for part in parts for key, value in part.tiles.items()]
        programs = prod(step.grid)
        shape = f"{launch.name}, {programs} program{'s' * (programs != 1)} of {launch.num_warps} warps"
        lines.append(f"{launch.kind}: {' '.join(ops)} [{', '.join([shape, *notes])}]")
    return lines


@dataclass
class Explanation:
    report: Report
    """Live: a backward pass or further calls of `compiled` add to it."""
    compiled: Callable[..., Any]
    """`fn` compiled with the backend writing into `report`."""
    output: Any
    """What the compiled call returned."""
    called: int = 0
    """Groups compiled by the explained call (later calls, in other graphs, add more)."""

    @property
    def fallbacks(self) -> list[str]:
        """Names of the ATen ops that ran in torch (`aten.erf.default`), sorted."""
        return sorted(self.report.fallbacks)

    @property
    def reasons(self) -> dict[str, str]:
        """ATen op name -> why it ran in torch."""
        return dict(self.report.fallbacks)

    @property
    def num_launches(self) -> int:
        """tinyton kernels one forward call of the explained call launches (for its groups' last shapes)."""
        groups = self.report.groups[: self.called]
        return sum(g.last.num_launches for g in groups if g.graph in FORWARD_GRAPHS and g.last)

    def __str__(self) -> str:
        head = f"tinyton: {self.num_launches} kernel launches per forward call, {len(self.fallbacks)} ATen ops ran in torch"
        lines = [head]
        lines += [f"  fallback {op}: {reason}" for op, reason in sorted(self.report.fallbacks.items())]
        for i, group in enumerate(self.report.groups):
            lines.append(f"group {i} ({group.graph}, {len(group.ops)} ATen ops: {' '.join(sorted(set(group.ops)))})")
            if group.last is not None:
                lines += [f"  kernel {k}: {line}" for k, line in enumerate(launched_kernels(group.last))]
            else:
                lines.append("  not called" if not group.programs else "  ran in torch")
        return "\n".join(lines)


def explain(fn: Callable[..., Any] | torch.nn.Module, *inputs: Any) -> Explanation:
    """Compile `fn` with the tinyton backend, call it once on `inputs`, and say what ran where."""
    report = Report()
    compiled = torch.compile(fn, backend=reported_backend(report))
    # dynamo compiles one code object (a module class's `forward`) at most `recompile_limit` times in a process, then
    # runs it eagerly without a word: the explained call is always compiled
    with torch._dynamo.config.patch(recompile_limit=sys.maxsize, accumulated_recompile_limit=sys.maxsize):
        output = compiled(*inputs)
    return Explanation(report, compiled, output, len(report.groups))
