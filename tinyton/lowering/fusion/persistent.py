"""Persistent programs: one a multiprocessor, each walking over output tiles, as Hopper's warp-specialised
kernels run (CUTLASS's and Triton's persistent matmuls).

A matmul region's kernel computes the tile of `program_id(0)` (an attention kernel's, a flat index of its query
blocks and heads: attention.py). Made persistent, its body runs in a loop over the
tiles `pid, pid + P, pid + 2P, ...` (P programs, at most one an SM), the loop marked `tt.warp_specialize`: the
pipeliner's producer warpgroup then copies the next tile's first K steps while the program's warps finish the
last tile's dots and its epilogue (tinyton/lowering/tt_to_llvm/warp_specialize.py). The tiles keep their order
(`program_indices.setup_programs`), so a wave of P programs still shares its operands in L2.
"""

from __future__ import annotations

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IntegerAttr, UnitAttr, i32
from xdsl.ir import Block, Operation, Region

from tinyton.dialects import tt


SHARED_FOR_TWO = 100 * 1024
"""Most shared memory a persistent program's ring of stages and the output tile its TMA store stages may take for
two programs to share an SM (an H100's 228 KiB, less each program's other buffers and 1 KiB the driver keeps):
then one program's epilogue runs while the other's dots do, as two-stage 128 x 128 tiles let the unsplit kernels
do (docs/benchmarks.md)."""


LEAST_LAUNCH_REGISTERS = 128
"""Registers a thread of a warp-specialised program must be launched with: ptxas refuses a wgmma of a 128 x 128
tile's 64 accumulator registers at 80 ("Insufficient registers", two programs of 12 warps an SM), whatever the
consumers' `setmaxnreg.inc` gives them later."""


def programs_sharing_an_sm(shared_bytes: int, num_warps: int) -> int:
    """Persistent programs of `num_warps` warps (and the producer warpgroup) that share an SM: two when the shared
    memory each takes is small enough and each thread still starts with LEAST_LAUNCH_REGISTERS, else one."""
    threads = 32 * (num_warps + tt.PRODUCER_WARPS)
    fits = shared_bytes <= SHARED_FOR_TWO and tt.REGISTER_FILE // 2 // threads >= LEAST_LAUNCH_REGISTERS
    return 2 if fits else 1


def persist(block: Block, tiles: int, sm_count: int, per_sm: int = 1, invariant: Operation | None = None) -> int:
    """Wrap a kernel's body `block` in a loop over its `tiles` (each its former `program_id(0)`); gives the
    programs to launch: `per_sm` for each of the GPU's SMs, or tiles if fewer. The ops up to `invariant` (what
    every tile reads alike, such as a runtime scale) stay in front of the loop: run once, not a load a tile."""
    programs = min(tiles, sm_count * per_sm)
    body = Block(arg_types=[i32])
    ops = list(block.ops)
    tile_ops = ops[ops.index(invariant) + 1:] if invariant is not None else ops
    for op in [op for op in tile_ops if not isinstance(op, func.ReturnOp)]:
        op.detach()
        body.add_op(op)
    for op in list(body.walk()):
        if isinstance(op, (tt.ProgramIdOp, tt.NumProgramsOp)) and op.axis.value.data == 0:
            assert isinstance(op, tt.ProgramIdOp), "a tile's kernel does not ask for its grid"
            op.result.replace_all_uses_with(body.args[0])
            op.detach()
            op.erase()
    body.add_op(scf.YieldOp())
    first = tt.ProgramIdOp(0)
    end, step = (tt.ConstantOp(IntegerAttr(n, 32), i32) for n in (tiles, programs))
    loop = scf.ForOp(first.result, end.result, step.result, [], Region(body))
    loop.attributes[tt.WARP_SPECIALIZE_ATTR] = UnitAttr()
    block.add_ops([first, end, step, loop])  # the kernel's return comes after (`finish_module`)
    return programs
