"""Which IR each pass takes, checked at its entry so that wrong input gets a clear error, not wrong output.

The fusion passes take tta array programs (what tracing an `@tt.jit` array program gives); fed a tt kernel
they would wrap every op into an "unfusable" region and succeed. `tinyton-to-llvm` takes tt kernels; fed a
tta program it would find no kernel. Each check names the first op of the wrong kind and its location.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation

from tinyton.dialects import tta
from tinyton.dialects.tt import PointerType
from tinyton.errors import CompilationError, op_error

ARRAY_PROGRAM_PIPELINE = "tinyton-fuse,tinyton-fusion-to-kernels"


def _functions(module: ModuleOp) -> Iterator[func.FuncOp]:
    yield from (op for op in module.ops if isinstance(op, func.FuncOp))


def _body_ops(fn: func.FuncOp) -> Iterator[Operation]:
    for op in fn.walk():
        if op is not fn:
            yield op


def _call_error(op: func.CallOp, pass_name: str) -> CompilationError:
    return op_error(
        op,
        f"{pass_name} does not follow calls (to @{op.callee.root_reference.data}); inline the callee's ops into "
        "the caller: a program or kernel is one func.func",
    )


def check_array_program(module: ModuleOp, pass_name: str) -> None:
    """Every top-level `func.func` holds tta ops only (nested kernel modules are left alone)."""
    for fn in _functions(module):
        for op in _body_ops(fn):
            if isinstance(op, func.CallOp):
                raise _call_error(op, pass_name)
            if op.name.startswith("tta.") or isinstance(op, func.ReturnOp):
                continue
            if op.name.startswith(("tt.", "scf.", "arith.")):
                raise op_error(
                    op,
                    f"{pass_name} takes tta array programs (tensor ops, as tracing an @tt.jit array program gives), "
                    f"but @{fn.sym_name.data} is a tt kernel; lower tt kernels with -p tinyton-to-llvm",
                )
            raise op_error(op, f"{pass_name} takes tta array programs; {op.name} is not a tta op")
        pointers = [t for t in fn.function_type.inputs.data if isinstance(t, PointerType)]
        if pointers:
            raise op_error(
                fn,
                f"@{fn.sym_name.data} takes {pointers[0]} arguments, so it is a tt kernel; {pass_name} takes tta "
                "array programs (tensor arguments); lower tt kernels with -p tinyton-to-llvm",
            )


def check_kernel_module(module: ModuleOp, pass_name: str) -> None:
    """The functions of a kernel module are tt kernels: no tta ops, no tensor arguments, no calls."""
    for fn in _functions(module):
        for op in _body_ops(fn):
            if isinstance(op, func.CallOp):
                raise _call_error(op, pass_name)
            if op.name.startswith("tta."):
                raise op_error(
                    op,
                    f"{pass_name} takes tt kernels, but @{fn.sym_name.data} is a tta array program; turn it into "
                    f"kernels first: -p {ARRAY_PROGRAM_PIPELINE},{pass_name}",
                )
        tensors = [t for t in fn.function_type.inputs.data if isinstance(t, TensorType)]
        if tensors or fn.function_type.outputs.data:
            raise op_error(
                fn,
                f"{pass_name} takes tt kernels (!tt.ptr and scalar arguments, no results), but "
                f"@{fn.sym_name.data} takes or returns tensors, as a tta array program does; turn it into kernels "
                f"first: -p {ARRAY_PROGRAM_PIPELINE},{pass_name}",
            )


def check_fused_program(module: ModuleOp, pass_name: str) -> None:
    """A tta array program whose compute ops all sit in `tta.fusion` regions (one kernel each)."""
    check_array_program(module, pass_name)
    for fn in _functions(module):
        for op in fn.body.ops:
            if not isinstance(op, (tta.FusionOp, tta.ConstantOp, func.ReturnOp)):
                raise op_error(
                    op,
                    f"{pass_name} makes one kernel per tta.fusion region, and this op is in none; group the "
                    f"ops into regions first: -p {ARRAY_PROGRAM_PIPELINE}",
                )
