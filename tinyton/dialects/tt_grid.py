"""The `tt` ops that order a launch against the launches beside it on its stream (programmatic dependent launch).

A kernel launched with the programmatic stream serialization attribute may start before the launch before it
has completed: it runs until `tt.grid_dependency_wait`, which returns once that launch has completed and its
writes are visible. Whatever the kernel does before the wait may not read what the launch before it writes, nor
write anything; an array program's kernels load weights there (parameters marked `READ_ONLY_ATTR`, which no
launch of the program writes). `tt.launch_dependents` lets the launch after this one start before this one has
completed (it still waits at its own `tt.grid_dependency_wait`). Without the attribute both ops do nothing; the
simulator runs them as no-ops. `tinyton-grid-dependency` (tinyton/lowering/tt_to_llvm/grid_dependency.py) places
them; sm_90 and later only (PTX `griddepcontrol`).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, UnitAttr
from xdsl.ir import BlockArgument
from xdsl.irdl import IRDLOperation, irdl_op_definition, traits_def
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

READ_ONLY_ATTR = "tt.read_only"
"""Unit attribute of a kernel parameter (in the kernel's `arg_attrs`): no launch of the array program writes the
buffer it points to, so the kernel may load from it before `tt.grid_dependency_wait`."""

OVERLAP_ATTR = "tt.overlap_prior_grid"
"""Unit attribute of a kernel module: lower it with `tinyton-grid-dependency` (on sm_90 and later), so that it may
be launched while the kernel before it finishes."""

TRIGGER_ATTR = "tt.trigger_dependents"
"""Unit attribute of a kernel module with `OVERLAP_ATTR`: `tinyton-grid-dependency` also places a
`tt.launch_dependents` after the kernel's main loop."""


@irdl_op_definition
class GridDependencyWaitOp(IRDLOperation):
    """Wait until the launch this one depends on has completed and its writes are visible (`griddepcontrol.wait`)."""

    name = "tt.grid_dependency_wait"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "attr-dict"


@irdl_op_definition
class LaunchDependentsOp(IRDLOperation):
    """Let the next launch on the stream start once every program of this one has passed here or exited
    (`griddepcontrol.launch_dependents`); that launch still waits for this one to complete at its own wait."""

    name = "tt.launch_dependents"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "attr-dict"


GRID_OPS = (GridDependencyWaitOp, LaunchDependentsOp)


def read_only_params(kernel: func.FuncOp) -> set[BlockArgument]:
    """The kernel's parameters marked `tt.read_only`."""
    attrs = kernel.arg_attrs.data if isinstance(kernel.arg_attrs, ArrayAttr) else ()
    return {arg for arg, d in zip(kernel.args, attrs) if isinstance(d, DictionaryAttr) and READ_ONLY_ATTR in d.data}


def mark_read_only(kernel: func.FuncOp, params: Iterable[int]) -> None:
    """Mark parameters `params` (indices) `tt.read_only`."""
    chosen = set(params)
    none = [DictionaryAttr({})] * len(kernel.args)
    attrs = kernel.arg_attrs.data if isinstance(kernel.arg_attrs, ArrayAttr) else none
    marked = [DictionaryAttr({**d.data, READ_ONLY_ATTR: UnitAttr()}) if i in chosen else d for i, d in enumerate(attrs)]
    kernel.arg_attrs = ArrayAttr(marked)
