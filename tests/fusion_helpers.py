"""Run a traced array program kernel by kernel on the simulator (the fusion tests' own small executor)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyton.dialects.tt import element_type, shape_of
from tinyton.dialects.tta import program_function
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import KernelSpec, Scratch, fusion_to_kernels
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime.simulator import run


def compile_program(fn: Callable[..., Any], args: Sequence[np.ndarray], fuse: bool):
    module = trace(fn, list(args))
    fuse_module(module, fuse)
    module.verify()
    specs = fusion_to_kernels(module)
    for spec in specs:  # the codegen leaves verifying its kernels to its callers
        spec.module.verify()
    return module, specs


def execute(module, specs: Sequence[KernelSpec], args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Launch every kernel in order; buffers are flat contiguous arrays keyed by program value."""
    fn = program_function(module)
    env: dict[Any, np.ndarray] = {}
    for arg, value in zip(fn.body.block.args, (a for a in args if hasattr(a, "shape"))):
        env[arg] = np.ascontiguousarray(value).reshape(-1).copy()
    for spec in specs:
        for v in [*spec.outputs, *spec.scratch]:  # poisoned; a split region's kernels share their scratch
            if v not in env:
                shape, element = (v.shape, v.element) if isinstance(v, Scratch) else (shape_of(v.type), element_type(v.type))
                fill = 0 if isinstance(v, Scratch) and v.counter else 77  # a grid barrier's counter starts at 0
                env[v] = np.full(int(np.prod(shape)), fill, dtype=ELEMENT_TO_NUMPY[element])
        run(spec.module, spec.grid, [env[v] for v in spec.bindings])
    ret = fn.body.block.last_op
    return [env[v].reshape(shape_of(v.type)) for v in ret.operands]


def run_program(fn: Callable[..., Any], args: Sequence[np.ndarray], fuse: bool) -> tuple[list[np.ndarray], int]:
    """(outputs, number of kernel launches)."""
    module, specs = compile_program(fn, args, fuse)
    return execute(module, specs, args), len(specs)
