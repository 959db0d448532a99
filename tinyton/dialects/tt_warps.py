"""The `tt` ops of warp specialisation: a program's warps split into a producer and consumers.

`tinyton-pipeline` (tinyton/lowering/tt_to_llvm/warp_specialize.py) rewrites a K loop marked
`tt.warp_specialize` (`tl.range(..., warp_specialize=True)`, an array program's warp-specialised tile) whose
operands arrive by TMA into these ops, as Triton's `ttg.warp_specialize` and CUTLASS's warp-specialised Hopper
kernels are built:

    tt.barrier_alloc S ×2        `full` mbarriers (one arrival: the producer's, with the copies' bytes) and
    tt.barrier_init              `empty` ones (an arrival per consumer warp)
    tt.warp_specialize {
      producer:                  4 extra warps (a warpgroup) whose registers shrink to `producer_registers`:
        scf.for                  wait `empty[s]` to be released, then one thread copies the iteration's tiles
                                 into slot s with TMA, completing `full[s]`
    } {
      consumers:                 the program's warps, registers grown to `consumer_registers`:
        scf.for                  wait `full[s]`, dots on slot s left in flight, and once the previous
                                 iteration's dots are done release its slot (`tt.barrier_arrive empty`)
        ...                      the rest of the kernel (the epilogue), its barriers named: the producer warps
                                 do not take part in them
    }

With FlashAttention-3's ping-pong (`tt.pingpong` on the loop too), the consumer warpgroups take turns issuing a
step's dots (`tt.warpgroup_turn`: tinyton/lowering/tt_to_llvm/warpgroup_turns.py), so that one's softmax runs
while the other's products are on the tensor cores.

Only the lowering sees these ops (the simulator runs the loop as written).
"""

from __future__ import annotations

from xdsl.dialects.builtin import I32, IntegerAttr, StringAttr
from xdsl.ir import Region
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, region_def, traits_def
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect, NoTerminator

from tinyton.dialects.tt_tma import SlotArriveBase, SlotWaitBase
from tinyton.dialects.tt_types import require


WARP_SPECIALIZE_ATTR = "tt.warp_specialize"
"""Unit attribute of an `scf.for` (Triton's `tl.range(..., warp_specialize=True)`) asking the pipeliner for a
producer warpgroup that loads its operands while the program's warps compute."""

PINGPONG_ATTR = "tt.pingpong"
"""Unit attribute of an `scf.for` also marked `tt.warp_specialize`: its consumer warpgroups issue each step's dots
in turns (FlashAttention-3's ping-pong; an attention kernel's `Blocks.pingpong`)."""

TURN_STEPS = ("open", "take", "pass", "close")
"""`tt.warpgroup_turn`'s steps: before the loop, before a step's dots, after them, after the loop."""

PRODUCER_WARPS = 4
"""A warpgroup: `setmaxnreg` applies to whole warpgroups."""

REGISTER_FILE = 65536
"""32-bit registers of an SM (Ampere's and Hopper's), which the programs on it share and `setmaxnreg` moves between
a program's warpgroups."""


@irdl_op_definition
class WarpSpecializeOp(IRDLOperation):
    """Run `producer` on `producer_warps` warps beyond the program's and `consumer` on the program's own warps,
    each after setting its warps' registers (`setmaxnreg`); the kernel ends after it."""

    name = "tt.warp_specialize"
    producer_warps = prop_def(IntegerAttr[I32])
    producer_registers = prop_def(IntegerAttr[I32])
    consumer_registers = prop_def(IntegerAttr[I32])
    producer = region_def("single_block")
    consumer = region_def("single_block")
    traits = traits_def(NoTerminator(), MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = (
        "`producer` `(` $producer_warps `warps` `,` $producer_registers `registers` `)` $producer "
        "`consumers` `(` $consumer_registers `registers` `)` $consumer attr-dict"
    )

    def __init__(self, producer: Region, consumer: Region, producer_registers: int, consumer_registers: int):
        super().__init__(
            regions=[producer, consumer],
            properties={
                "producer_warps": IntegerAttr(PRODUCER_WARPS, 32),
                "producer_registers": IntegerAttr(producer_registers, 32),
                "consumer_registers": IntegerAttr(consumer_registers, 32),
            },
        )

    def verify_(self) -> None:
        for what in ("producer", "consumer"):
            count = getattr(self, f"{what}_registers").value.data
            valid = 24 <= count <= 256 and count % 8 == 0
            require(valid, f"setmaxnreg takes 24 to 256 registers in steps of 8, got {count}")


@irdl_op_definition
class BarrierWaitOp(SlotWaitBase):
    """Wait until mbarrier `slot` of `barriers` completes phase `phase`; no barrier among threads follows
    (`tt.tma_wait` adds one)."""

    name = "tt.barrier_wait"


@irdl_op_definition
class BarrierArriveOp(SlotArriveBase):
    """Where `valid`: each warp arrives once on mbarrier `slot` (after all its lanes are done with the slot)."""

    name = "tt.barrier_arrive"


@irdl_op_definition
class WarpgroupTurnOp(IRDLOperation):
    """A step of the consumer warpgroups' turns (FlashAttention-3's ping-pong scheduling), warpgroup w of N:
    `take` waits until warpgroup w - 1 passed (w = 0: N - 1), `pass` lets warpgroup w + 1 go; `open` (before the
    loop, or a persistent kernel's tile loop) lets warpgroup 0 take the first turn, `close` (after it) consumes the
    last pass to warpgroup 0, so every named barrier is left as it was found."""

    name = "tt.warpgroup_turn"
    step = prop_def(StringAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$step attr-dict"

    def __init__(self, step: str):
        super().__init__(properties={"step": StringAttr(step)})

    def verify_(self) -> None:
        require(self.step.data in TURN_STEPS, f"a warpgroup turn's step is one of {TURN_STEPS}, got {self.step.data!r}")


WARP_OPS = (WarpSpecializeOp, BarrierWaitOp, BarrierArriveOp, WarpgroupTurnOp)
