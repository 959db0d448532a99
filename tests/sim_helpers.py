"""Running a `@tt.jit` kernel on the NumPy simulator whatever the backend (GPU differential tests compare it)."""

from __future__ import annotations

from typing import Any

from tinyton.compiler import CompiledKernel
from tinyton.frontend.arguments import runtime_values
from tinyton.runtime import simulator


def run_sim(kernel: Any, grid: tuple[int, ...], *args: Any, batched: bool | None = None, **kwargs: Any) -> CompiledKernel:
    """Compile the variant these arguments launch and interpret its module; arrays are updated in place."""
    compiled = kernel.compile(*args, **kwargs)
    runtime = runtime_values([a for a, p in zip(args, kernel.params) if not p.constexpr])
    simulator.run(compiled.module, grid, runtime, batched=batched)
    return compiled
