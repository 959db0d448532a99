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

A persistent kernel's consumers run that loop once a tile, inside their tile loop: `open` and `close` then go
around the tile loop, so the turns run on from one tile into the next. Around each tile's loop they would race: a
named barrier counts arrivals, not warpgroups, so warpgroup N - 1, running ahead through its epilogue (or through a
tile with no steps, a causal pair's empty block), could `pass` and `open` again before warpgroup 0 reached its
`close`: two arrivals completing the barrier with no one waiting, and both warpgroups blocked for good after
(compute-sanitizer's racecheck, slowing warps unevenly, hung there).

The lowering (warp_roles.py) makes each turn a named barrier of two warpgroups' threads: `bar.sync` by the
warpgroup taking its turn, `bar.arrive` by the one passing. Nothing between `take` and `pass` may wait for all
consumers (a barrier there would deadlock): the lowering refuses one.
"""

from __future__ import annotations

from xdsl.dialects import func, scf
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
    site = _outermost(loop)
    block = site.parent_block()
    assert block is not None
    block.insert_op_before(tt.WarpgroupTurnOp("open"), site)
    block.insert_op_after(tt.WarpgroupTurnOp("close"), site)


def _outermost(loop: scf.ForOp) -> Operation:
    """The op of the consumers' region that holds `loop`: a persistent kernel's tile loop, else the loop itself."""
    site: Operation = loop
    while (parent := site.parent_op()) is not None and not isinstance(parent, (tt.WarpSpecializeOp, func.FuncOp)):
        site = parent
    return site
