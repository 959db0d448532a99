"""
Atomics and the debug barrier: `tt.atomic_rmw`, `tt.atomic_cas`, `tt.debug_barrier`.

Each lane is one PTX `atom.<sem>.<scope>.global.<op>.<type>` in inline asm (as Triton: LLVM's atomicrmw
has no float max/min on NVPTX and xDSL's llvm dialect no atomicrmw), predicated by the mask and by
`replica_predicate`, so that exactly one thread performs each lane's atomic; its output is zeroed first,
so a masked-off lane gives 0 as in the simulator. Float max/min are integer atomics on the bits: a
non-negative value takes a signed max (min) of the bits, a negative one an unsigned min (max). Where other
threads hold replicas of a lane (a small tile, or a scalar atomic, which thread 0 performs) and the old
values are used, the performing thread shares them through shared memory (the replicas write a spare slot).

`tt.grid_barrier` is the cooperative-groups grid sync: `bar.sync`, then thread 0 of each program adds to the
counter with `atom.add.release.gpu` (the leader adds 2**31 - (programs - 1), the others 1: the sum flips bit 31
and leaves the low bits as they were) and spins on `ld.acquire.gpu` until bit 31 differs from the value it
found, then `bar.sync` again. The release is cumulative over the writes the first `bar.sync` ordered before
it, and the acquire over the reads the second orders after it.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects import llvm
from xdsl.dialects.builtin import AnyFloat, IntegerType, Signedness
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import (
    KernelContext,
    LoweringError,
    llvm_type,
    lowers,
    lowers_tile,
)
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.shared import byte_size

PTX_OP = {"add": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor", "xchg": "exch"}
CONSTRAINT = {16: "h", 32: "r", 64: "l"}


def _type_suffix(kind: str, elem: Attribute, tt_elem: Attribute) -> str:
    """The PTX type of `atom.<kind>` on `elem` (kind "cas" for compare-and-swap)."""
    bits = elem.bitwidth
    if kind in ("and", "or", "xor", "xchg", "cas"):
        return f".b{bits}"
    if isinstance(elem, AnyFloat):
        return ".noftz.f16" if bits == 16 else f".f{bits}"
    unsigned = isinstance(tt_elem, IntegerType) and tt_elem.signedness.data == Signedness.UNSIGNED
    if kind == "add":
        return f".u{bits}"  # PTX has no atom.add.s64; two's complement makes them one
    return f".{'u' if unsigned else 's'}{bits}"


def _bits(ctx: KernelContext, x: SSAValue) -> SSAValue:
    return ctx.value(llvm.BitcastOp(x, IntegerType(x.type.bitwidth))) if isinstance(x.type, AnyFloat) else x


def _lane_atomic(
    ctx: KernelContext, op: tt.AtomicRMWOp | tt.AtomicCASOp, ptr: SSAValue, values: list[SSAValue], pred: SSAValue | None
) -> SSAValue:
    """One lane's atomic; `values` are the operands (val, or cmp and val); gives the old value."""
    elem = values[-1].type
    bits = elem.bitwidth
    reg = IntegerType(bits)
    sem, scope = op.sem.data, op.scope.data
    words = [_bits(ctx, v) for v in values]
    kind = op.kind.data if isinstance(op, tt.AtomicRMWOp) else "cas"
    tt_elem = tt.element_type(op.val.type)
    operands = ", ".join(f"${2 + i}" for i in range(len(words)))
    inputs: list[tuple[str, SSAValue]] = [("l", ptr), *((CONSTRAINT[bits], w) for w in words)]
    if kind in ("max", "min") and isinstance(elem, AnyFloat):
        non_negative = ctx.icmp("sge", words[0], ctx.const(0, reg))
        negative = ctx.int_op("xor", non_negative, ctx.const(1, IntegerType(1)))
        other = "min" if kind == "max" else "max"
        guards = [(ctx.all_of([pred, non_negative]), f"{kind}.s{bits}"), (ctx.all_of([pred, negative]), f"{other}.u{bits}")]
    else:
        guards = [(pred, PTX_OP.get(kind, kind) + _type_suffix(kind, elem, tt_elem))]
    lines = [f"mov.b{bits} $0, 0;"]
    for guard, instruction in guards:
        prefix = ""
        if guard is not None:
            inputs.append(("b", guard))
            prefix = f"@${len(inputs)} "
        lines.append(f"{prefix}atom.{sem}.{scope}.global.{instruction} $0, [ $1 + 0 ], {operands};")
    asm = llvm.InlineAsmOp(
        "\n\t".join(lines),
        ",".join([f"={CONSTRAINT[bits]}", *(c for c, _ in inputs)]),
        [v for _, v in inputs],
        [reg],
        has_side_effects=True,
    )
    old = ctx.value(asm)
    return ctx.value(llvm.BitcastOp(old, elem)) if isinstance(elem, AnyFloat) else old


def _share_with_replicas(
    ctx: KernelContext, regs: list[SSAValue], layout: Layout | None, owner: SSAValue, elem: Attribute
) -> list[SSAValue]:
    """Each register's value as its owner thread has it, for all threads, through shared memory."""
    shape = layout.shape if layout is not None else ()
    count = prod(shape)
    nbytes = (count + 1) * byte_size(elem)
    start = ctx.smem_buffer(nbytes, f"the old values of an atomic on a {list(shape)} tile")
    strides = [prod(shape[d + 1 :]) for d in range(len(shape))]
    indices = []
    for r in range(len(regs)):
        index = ctx.const(0)
        if layout is not None:
            for c, s in zip(ctx.coords(layout, r), strides):
                index = ctx.int_op("add", index, ctx.int_op("mul", c, ctx.const(s)))
        indices.append(index)
        slot = ctx.select(owner, index, ctx.const(count))
        ctx.insert(llvm.StoreOp(regs[r], ctx.smem_ptr(elem, slot, start)))
    ctx.barrier()
    out = [ctx.value(llvm.LoadOp(ctx.smem_ptr(elem, index, start), elem)) for index in indices]
    ctx.smem_read(start, nbytes)
    return out


@lowers_tile(tt.AtomicRMWOp, tt.AtomicCASOp)
def lower_atomic(ctx: KernelContext, op: tt.AtomicRMWOp | tt.AtomicCASOp, layout: Layout | None) -> list[SSAValue]:
    elem = llvm_type(op.result.type)
    if elem.bitwidth not in CONSTRAINT:
        raise LoweringError(f"{op.name} on {elem} is not supported")
    ptrs = ctx.get(op.ptr, layout)
    names = ("val",) if isinstance(op, tt.AtomicRMWOp) else ("cmp", "val")
    operands = [ctx.get(getattr(op, n), layout) for n in names]
    masks = ctx.get(op.mask, layout) if isinstance(op, tt.AtomicRMWOp) and op.mask is not None else None
    owner = ctx.replica_predicate(layout)
    old = [
        _lane_atomic(ctx, op, ptr, [o[r] for o in operands], ctx.all_of([masks[r] if masks else None, owner]))
        for r, ptr in enumerate(ptrs)
    ]
    if owner is None or op.result.first_use is None:
        return old
    return _share_with_replicas(ctx, old, layout, owner, elem)


@lowers(tt.DebugBarrierOp)
def lower_debug_barrier(ctx: KernelContext, op: tt.DebugBarrierOp) -> None:
    ctx.barrier()


GRID_BARRIER = [
    "{",
    ".reg .pred %gb_p;",
    ".reg .b32 %gb_r<4>;",
    "mov.u32 %gb_r0, %tid.x;",
    "mov.u32 %gb_r1, %tid.y;",
    "or.b32 %gb_r0, %gb_r0, %gb_r1;",
    "mov.u32 %gb_r1, %tid.z;",
    "or.b32 %gb_r0, %gb_r0, %gb_r1;",
    "setp.ne.u32 %gb_p, %gb_r0, 0;",
    "@%gb_p bra GB_DONE;",
    "selp.u32 %gb_r1, {lead}, 1, $1;",
    "atom.add.release.gpu.global.u32 %gb_r2, [$0], %gb_r1;",
    "GB_SPIN:",
    "ld.acquire.gpu.global.u32 %gb_r3, [$0];",
    "xor.b32 %gb_r3, %gb_r3, %gb_r2;",
    "setp.gt.s32 %gb_p, %gb_r3, -1;",
    "@%gb_p bra GB_SPIN;",
    "GB_DONE:",
    "}",
]
"""Thread 0's arrival and wait (labels and registers are local to the braces, so it may appear twice);
`{lead}` is the leader's addend."""


@lowers(tt.GridBarrierOp)
def lower_grid_barrier(ctx: KernelContext, op: tt.GridBarrierOp) -> None:
    lead = (1 << 31) - (op.programs.value.data - 1)
    text = "\n\t".join(GRID_BARRIER).replace("{lead}", str(lead))
    ctx.barrier()
    operands = [ctx.scalar(op.counter), ctx.scalar(op.leader)]
    ctx.insert(llvm.InlineAsmOp(text, "l,b", operands, [], has_side_effects=True))
    ctx.barrier()
