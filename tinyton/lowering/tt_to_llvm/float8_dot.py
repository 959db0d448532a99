"""float8 `tt.dot`s made ready for the tensor cores, before pipelining and layout assignment.

A dot of two float8 tiles (e4m3fn, e5m2) with an f32 accumulator runs on wgmma's `.e4m3`/`.e5m2` where the
target has it and the tile fits (`runs_on_wgmma`). 8-bit wgmma reads both operands K-major from shared memory:
a B loaded as stored by rows of K (`tt.trans` of an N x K tile: `x @ w.T`, torch._scaled_mm's layout) is
read as it is; any other B is transposed through registers (`tt.trans` twice: the N x K tile is what gets
stored to shared memory). Everywhere else (sm_80-sm_89: mma.sync has no float8 at the shapes tinyton uses, and
tiles that do not fit wgmma) both operands are widened to f16, exactly (every float8 value is an f16), and
the dot runs as an f16 one: the same result.

Hopper's float8 wgmma does not accumulate in f32: its sum keeps about 13 fraction bits (DeepSeek-V3's report;
no result of the 2026-11-28 H200 run of a 256-deep chain has more than 13). A dot with
`max_num_imprecise_acc` (Triton's) therefore sums at most that many products per chain of wgmmas into a
fresh partial accumulator, which the CUDA cores add to the f32 one (`promotion_steps`; `wgmma.py`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, f16

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.mma_layout import k_major_b
from tinyton.lowering.tt_to_llvm.wgmma_layout import k_step, promotes, runs_on_wgmma, wgmma_tiling


def promotion_steps(op: tt.DotOp | tt.PromotedDotOp) -> int | None:
    """The wgmma instructions (K steps) of `op` summed into one partial accumulator before it is added to the
    f32 one, as Triton's WGMMA lowering counts them (at least one, a partial also ends with the dot's K);
    None when the dot accumulates in its wgmma chain (not float8, or no `max_num_imprecise_acc`)."""
    if not promotes(op):
        return None
    assert op.max_num_imprecise_acc is not None
    return max(1, -(-op.max_num_imprecise_acc.value.data // k_step(op)))


def chain_in_flight(op: tt.DotOp | tt.PromotedDotOp, num_warps: int) -> int | None:
    """The K steps of each of the two chains of `op`, a promoting dot, left in flight as a `tt.PromotedDotOp`
    (`wgmma.py`); None when it cannot be: it needs one wgmma block per warpgroup and an even number of K steps,
    halves within `promotion_steps`."""
    steps = promotion_steps(op)
    k = tt.shape_of(op.a.type)[1] // k_step(op)
    tiling = wgmma_tiling(op, num_warps)
    if steps is None or k % 2 or k // 2 > steps or tiling.reps_m * tiling.reps_n != 1:
        return None
    return k // 2


def prepare_float8_dots(module: ModuleOp, num_warps: int, arch: str) -> None:
    """Give each float8 dot of `module` a K-major B (wgmma) or f16 operands (everywhere else)."""
    for op in [op for op in module.walk() if isinstance(op, tt.DotOp)]:
        if not isinstance(tt.element_type(op.a.type), tt.FLOAT8_TYPES):
            continue
        if runs_on_wgmma(op, num_warps, arch):
            if k_major_b(op) is None:
                transposed = tt.TransOp(op.b, (1, 0))
                back = tt.TransOp(transposed, (1, 0))
                op.parent_block().insert_ops_before([transposed, back], op)
                op.operands[1] = back.result
            continue
        for i in (0, 1):
            widened = tt.CastOp(op.operands[i], f16)
            op.parent_block().insert_op_before(widened, op)
            op.operands[i] = widened.result
