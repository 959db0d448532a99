"""The L2 eviction policy of the loads of generated kernels (Triton's `eviction_policy`).

Under do_bench (which flushes L2 by writing 256 MB before every run) a kernel reading a tensor that fits in L2
competes with the flush's dirty lines being written back: loads with `evict_last` keep their lines ahead of
the dirty ones. On an H100 a Triton copy of 16x262144 ran 10 % (fp32) and 39 % (fp16) faster with it, and
within 2 % at 64x262144 and 4096x4096. The lines read stay in L2 with a high priority after the kernel; the
next kernel reads its own inputs, which are the last kernel's outputs (written with the normal priority)
and lost first: docs/design.md, "L2 policies", has the reasoning and the measured two-kernel chain.
"""

from __future__ import annotations

GRID_LOADS: str | None = "evict_last"
"""Policy of the input loads of the one-kernel split rows (`grid.py`): each slice is read once, while the
flush's lines drain."""
SPLIT_LOADS: str | None = None
"""Policy of the input loads of the two-kernel split rows (`split.py`) but the last kernel's: the next
kernel of the chain reads the same slices again, from L2 where they stayed."""
ROW_LOADS: str | None = None
"""Policy of the input loads of row and elementwise kernels (`schedule.py`)."""


def hints(policy: str | None) -> dict[str, str]:
    """The `tt.load` properties of `policy`."""
    return {"evict": policy} if policy else {}
