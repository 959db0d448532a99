"""Programmatic dependent launch (sm_90 and later): a kernel's programs start while the kernel before it in
the stream finishes.

Between two kernels of a stream (or of a CUDA graph replay) the GPU otherwise idles: the second kernel is
launched only once the first has completed and flushed, and its programs then ramp up their first loads. A
decode step of a Llama model is a hundred short, memory-bound kernels, where those gaps are a large share of the
step. A kernel that begins with `griddepcontrol.wait` (wait until the kernels it depends on have completed and
their writes are visible) may be launched with the `PROGRAMMATIC_STREAM_SERIALIZATION` attribute
(runtime/launch.py): its programs are then placed on the SMs as soon as every program of the kernel before has
executed `griddepcontrol.launch_dependents`, and sit at the wait. Both instructions come first in the kernel, so
nothing it reads or writes can race the kernel before; what is gained is the launch and the placing of the
programs, overlapped with the previous kernel's last wave. Safe by induction: every kernel waits for its
predecessor's completion before it completes. A kernel with a grid barrier (launched cooperatively) gets
neither."""

from __future__ import annotations

from xdsl.dialects import func, llvm

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext

WAIT = "griddepcontrol.wait;"
LAUNCH_DEPENDENTS = "griddepcontrol.launch_dependents;"


def supported(arch: str) -> bool:
    """Whether `arch` (`sm_NN`, `sm_NNa`) has the griddepcontrol instructions (PTX ISA 7.8, sm_90 and later)."""
    return arch.startswith("sm_") and arch[3:5].isdigit() and int(arch[3:5]) >= 90


def emit_prologue(ctx: KernelContext, kernel: func.FuncOp, arch: str) -> bool:
    """Begin the kernel with the wait and the early trigger of the kernel after it, where `arch` has them and
    the kernel is not launched cooperatively; whether it did (the kernel may then be launched to overlap)."""
    if not supported(arch) or any(isinstance(op, tt.GridBarrierOp) for op in kernel.walk()):
        return False
    for text in (WAIT, LAUNCH_DEPENDENTS):
        ctx.insert(llvm.InlineAsmOp(text, "", [], [], has_side_effects=True))
    return True
