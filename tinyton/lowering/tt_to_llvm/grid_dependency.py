"""
`tinyton-grid-dependency`: let a kernel start before the kernel before it has completed, loading weights meanwhile.

Takes: a tt kernel module whose parameters that no launch of the array program writes carry `tt.read_only`
(`program.py` marks them). Gives: the kernel with a `tt.grid_dependency_wait` placed in its top-level block:

    ...                              pure ops, loads (or cp.async copies) through read-only parameters only
    tt.grid_dependency_wait          the launch before has completed; its writes are visible
    ...                              everything else: loads of what earlier kernels wrote, every store
    scf.for ...                      the kernel's last top-level loop (its main loop)
    tt.launch_dependents             only in a module marked `tt.trigger_dependents`

The wait goes before the first op that may not run early (a load through a pointer that is not read-only, a
store, an atomic, a loop or branch, a barrier), and the read-only loads of the kernel's prologue (those before
its last top-level loop: a GEMV's first weight tiles, a pipelined loop's first copies) move above it, with the
pure ops that compute their pointers and masks. Loads after the last loop (an epilogue's bias) stay where they
are: moving them would keep their registers live across the loop.

Why: a decode step is a chain of short, memory-bound kernels. Launched with programmatic stream serialization
(`runtime/launch.py`), a kernel is launched before the one before it has completed (when that one triggers it,
below), and its programs issue their first weight loads while that kernel finishes, instead of after the launch gap.

An array program's kernels trigger their dependents (`griddepcontrol.launch_dependents`) after their main loop
(the module mark `tt.trigger_dependents`; `TINYTON_TRIGGER_DEPENDENTS=0` leaves it out): the next kernel is
launched once every program of this one has issued its last loop step, so it places none of its programs before all
of this one's are placed, and its weight loads overlap this one's reductions and stores. Measured on an H200
(Llama-3.2-1B decode step, batch 1, one CUDA-graph replay, `bench_llm.py`, 2026-12-04): 0.852 ms a step with the
trigger after the main loop, 0.870 without a trigger (every program exited first). A trigger right after the wait
had made the step 7.5 % slower than plain launches (1.008 against 0.933 ms, 2026-12-04): the next kernel's programs,
placed while this one's were still being placed, were spread unevenly over the SMs (a GEMV of about one program an
SM reads at the pace of its busiest SM).

Every program passes the wait (it sits in the top-level block, which no program leaves early), so each launch
completes after the one before it: the chain of waits orders the whole program.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, llvm, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator, Pure

from tinyton.analysis.pass_inputs import check_kernel_module
from tinyton.dialects import tt
from tinyton.dialects.tt_grid import read_only_params
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers

SM_GRID_DEPENDENCY = 90
"""The first compute capability with `griddepcontrol` (Hopper)."""


def _pure(op: Operation) -> bool:
    return op.has_trait(Pure) and not op.regions and not op.has_trait(IsTerminator)


class _Early:
    """Which top-level ops may run before the wait: pure ops, shared-memory allocations, and loads whose
    pointers (and masks) derive only from read-only parameters and pure ops."""

    def __init__(self, read_only: set[BlockArgument], body: Block):
        self.read_only, self.body, self._known = read_only, body, {}

    def value(self, v: SSAValue) -> bool:
        if isinstance(v, BlockArgument):
            return v.block is self.body and (v in self.read_only or not isinstance(v.type, tt.PointerType))
        return self.op(v.owner)

    def op(self, op: Operation) -> bool:
        if op not in self._known:
            self._known[op] = False  # no cycles in SSA: a guard only
            self._known[op] = self._allowed(op) and all(self.value(v) for v in op.operands)
        return self._known[op]

    @staticmethod
    def _allowed(op: Operation) -> bool:
        if isinstance(op, tt.LoadOp):
            return op.volatile is None
        return _pure(op) or isinstance(op, (tt.LocalAllocOp, tt.AsyncCopyOp))


def _is_load(op: Operation) -> bool:
    return isinstance(op, (tt.LoadOp, tt.AsyncCopyOp))


def _slice(op: Operation, after: set[Operation]) -> set[Operation]:
    """`op` and the ops among `after` that compute its operands, transitively."""
    found, todo = {op}, [op]
    while todo:
        for v in todo.pop().operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in after and owner not in found:
                found.add(owner)
                todo.append(owner)
    return found


def place_grid_dependency(kernel: func.FuncOp) -> None:
    """Insert the wait into `kernel` and move its read-only prologue loads above it; in a module marked
    `tt.trigger_dependents`, a `tt.launch_dependents` after its last top-level loop (none in a kernel without one)."""
    module = kernel.parent_op()
    trigger = isinstance(module, ModuleOp) and tt.TRIGGER_ATTR in module.attributes
    body = kernel.body.block
    if any(isinstance(op, tt.GridDependencyWaitOp) for op in kernel.walk()):
        return
    early = _Early(read_only_params(kernel), body)
    ops = list(body.ops)
    first = next(i for i, op in enumerate(ops) if not early.op(op))  # the func.return at the latest
    loops = [i for i, op in enumerate(ops) if isinstance(op, scf.ForOp)]
    prologue_end = loops[-1] if loops else len(ops)
    wait = tt.GridDependencyWaitOp()
    body.insert_op_before(wait, ops[first])
    if trigger and loops and loops[-1] >= first:
        body.insert_op_after(tt.LaunchDependentsOp(), ops[loops[-1]])
    after = set(ops[first:])
    for op in ops[first + 1 : prologue_end]:
        # every op asked in block order: its operands' answers are known, so no answer recurses down a long chain
        if not (early.op(op) and _is_load(op) and op in after):
            continue
        moved = _slice(op, after)
        for m in [o for o in ops if o in moved]:  # in block order: each after its operands
            m.detach()
            body.insert_op_before(m, wait)
        after -= moved


@dataclass(frozen=True)
class GridDependencyPass(ModulePass):
    """Place `tt.grid_dependency_wait` (and in modules marked `tt.trigger_dependents`, `tt.launch_dependents`) in
    the module's kernels (see the module text)."""

    name = "tinyton-grid-dependency"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        modules = [op, *(m for m in op.ops if isinstance(m, ModuleOp))]  # nested: one kernel module each
        for module in modules:
            check_kernel_module(module, self.name)
            for kernel in module.ops:
                if isinstance(kernel, func.FuncOp):
                    place_grid_dependency(kernel)


@lowers(tt.GridDependencyWaitOp)
def lower_grid_dependency_wait(ctx: KernelContext, op: tt.GridDependencyWaitOp) -> None:
    if ctx.sm >= SM_GRID_DEPENDENCY:  # before Hopper every launch waits for the one before it anyway
        ctx.insert(llvm.InlineAsmOp("griddepcontrol.wait;", "~{memory}", [], [], has_side_effects=True))


@lowers(tt.LaunchDependentsOp)
def lower_launch_dependents(ctx: KernelContext, op: tt.LaunchDependentsOp) -> None:
    if ctx.sm >= SM_GRID_DEPENDENCY:
        ctx.insert(llvm.InlineAsmOp("griddepcontrol.launch_dependents;", "~{memory}", [], [], has_side_effects=True))
