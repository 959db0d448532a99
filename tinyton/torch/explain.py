"""`tinyton.torch.explain(fn_or_module, *inputs)`: what the backend does with a model, from one call.

It compiles `fn_or_module` with the tinyton backend, calls it once on `inputs`, and reports the ATen ops
that ran in torch (each with its reason), the tinyton kernels one forward call launches, and per tinyton
group its ATen ops and the fused kernels they became (each `tta.fusion` region's kind and ops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from tinyton.dialects import tta
from tinyton.dialects.tta import program_function
from tinyton.torch.backend import reported_backend
from tinyton.torch.report import Report

FORWARD_GRAPHS = ("forward", "inference")


def fused_kernels(fused: ModuleOp) -> list[str]:
    """One line per kernel of a fused program: its kind and the ops inside."""
    lines = []
    for op in program_function(fused).body.block.ops:
        if isinstance(op, tta.FusionOp):
            inner = [o.name.removeprefix("tta.") for o in op.body.block.ops if not isinstance(o, tta.YieldOp)]
            lines.append(f"{op.kind.data}: {' '.join(inner)}")
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
                lines += [f"  kernel {k}: {line}" for k, line in enumerate(fused_kernels(group.last.fused))]
            else:
                lines.append("  not called" if not group.programs else "  ran in torch")
        return "\n".join(lines)


def explain(fn: Callable[..., Any] | torch.nn.Module, *inputs: Any) -> Explanation:
    """Compile `fn` with the tinyton backend, call it once on `inputs`, and say what ran where."""
    report = Report()
    compiled = torch.compile(fn, backend=reported_backend(report))
    output = compiled(*inputs)
    return Explanation(report, compiled, output, len(report.groups))
