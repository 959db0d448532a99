"""Persistent programs: one a multiprocessor, each walking over output tiles, as Hopper's warp-specialised
kernels run (CUTLASS's and Triton's persistent matmuls).

A matmul region's kernel computes the tile of `program_id(0)`. Made persistent, its body runs in a loop over the
tiles `pid, pid + P, pid + 2P, ...` (P programs, at most one an SM), the loop marked `tt.warp_specialize`: the
pipeliner's producer warpgroup then copies the next tile's first K steps while the program's warps finish the
last tile's dots and its epilogue (tinyton/lowering/tt_to_llvm/warp_specialize.py). The tiles keep their order
(`program_indices.setup_programs`), so a wave of P programs still shares its operands in L2.
"""

from __future__ import annotations

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IntegerAttr, UnitAttr, i32
from xdsl.ir import Block, Region

from tinyton.dialects import tt


def persist(kernel: func.FuncOp, tiles: int, sm_count: int) -> int:
    """Wrap `kernel`'s body in a loop over its `tiles` (each its former `program_id(0)`); gives the programs to
    launch: as many as the GPU has SMs, or tiles if fewer."""
    programs = min(tiles, sm_count)
    block = kernel.body.block
    body = Block(arg_types=[i32])
    for op in [op for op in block.ops if not isinstance(op, func.ReturnOp)]:
        op.detach()
        body.add_op(op)
    for op in list(body.walk()):
        if isinstance(op, (tt.ProgramIdOp, tt.NumProgramsOp)) and op.axis.value.data == 0:
            assert isinstance(op, tt.ProgramIdOp), "a matmul tile's kernel does not ask for its grid"
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
