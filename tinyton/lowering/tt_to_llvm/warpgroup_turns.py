"""FlashAttention-3's ping-pong: a warp-specialised loop's consumer warpgroups issue each step's dots in turns.

The consumers of a loop marked `tt.warp_specialize` and `tt.pingpong` (an attention kernel's `Blocks.pingpong`)
are two or more warpgroups, each computing its own rows of the tile on the same slots. Left alone they issue their
dots at the same moments and then all run their softmax while the tensor cores idle. Ordered in turns, warpgroup
0 issues its dots, then 1 (while 0 runs its softmax), then 0 again, so the tensor cores stay busy:

    tt.warpgroup_turn open                     warpgroup N - 1 lets 0 go first
    scf.for ... {
      ...                                      (the wait for the slot's copies)
      tt.warpgroup_turn take                   wait for the previous warpgroup's pass
      s = tt.dot ...; acc = tt.dot ...         the step's dots, issued back to back
      tt.warpgroup_turn pass                   let the next warpgroup issue its own
      ...                                      the softmax, the waits for the dots
    }
    tt.warpgroup_turn close                    warpgroup 0 takes the last pass: the barriers end as they began

The lowering (warp_roles.py) makes each turn a named barrier of two warpgroups' threads: `bar.sync` by the
warpgroup taking its turn, `bar.arrive` by the one passing. Nothing between `take` and `pass` may wait for all
consumers (a barrier there would deadlock): the lowering refuses one.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.ir import Operation

from tinyton.dialects import tt


def take_turns(loop: scf.ForOp, warpgroups: int) -> None:
    """Order the first run of adjacent dots of `loop`'s body (the consumers' loop) by warpgroup turns, where it has
    dots and two or more warpgroups to order."""
    body = loop.body.block
    first = next((op for op in body.ops if isinstance(op, tt.DotOp)), None)
    if first is None or warpgroups < 2:
        return
    last: Operation = first
    while isinstance(last.next_op, tt.DotOp):
        last = last.next_op
    body.insert_op_before(tt.WarpgroupTurnOp("take"), first)
    body.insert_op_after(tt.WarpgroupTurnOp("pass"), last)
    block = loop.parent_block()
    assert block is not None
    block.insert_op_before(tt.WarpgroupTurnOp("open"), loop)
    block.insert_op_after(tt.WarpgroupTurnOp("close"), loop)
