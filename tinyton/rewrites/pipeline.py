"""Entry point of the fusion stage for the array-program compiler (tinyton/compiler/program.py).

    module = trace(fn, args)            # tinyton.frontend.tracing: one func.func of tta ops
    fuse_module(module, fuse=True)      # -> tta.fusion regions, one kernel each
    specs = fusion_to_kernels(module)   # tinyton.lowering.fusion
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from tinyton.rewrites.fuse import FusePass
from tinyton.rewrites.in_place import InPlacePass
from tinyton.rewrites.long_sorts import SplitLongSortsPass
from tinyton.rewrites.outline import outline_each_op
from tinyton.rewrites.patterns import default_context
from tinyton.rewrites.remap import ConcatenateToSlicesPass


def fuse_module(module: ModuleOp, fuse: bool = True) -> ModuleOp:
    """Group the module's ops into `tta.fusion` regions, in place: patterns + general fusion, or
    (fuse=False) one region per op, the unfused baseline."""
    if fuse:
        FusePass().apply(default_context(), module)
    else:
        SplitLongSortsPass().apply(default_context(), module)
        ConcatenateToSlicesPass().apply(default_context(), module)
        InPlacePass().apply(default_context(), module)
        outline_each_op(module)
    return module


__all__ = ["fuse_module", "outline_each_op"]
