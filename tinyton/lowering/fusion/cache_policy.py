"""The L2 eviction policy of the input loads of generated kernels (Triton's `eviction_policy`): none by
default, because none paid where it was measured.

Under do_bench (which flushes L2 by writing 256 MB before every run) a copy of a tensor that fits in L2 runs
faster with `evict_last` loads: on an H100, 16x262144 fp32 14.98 -> 14.30 µs, fp16 10.14 -> 8.24 µs (and
Triton's 15.07 -> 13.71, 9.92 -> 7.65), within 2 % at 64x262144. The fused kernels did not move (within ±2 %,
the timer's step): the one-kernel split rows at 16x262144 spend their time on the latency chain after the
loads (partials, grid barrier, combine), not on the flush's write-backs; the two-kernel split rows at
64x262144 and the row kernels at 8192x1024, 4096x4096, 1024x32768 and 32x2048 neither. Nor did a softmax
followed by an rmsnorm of its output lose with it. docs/design.md ("L2 eviction policies") has the reasoning,
docs/benchmarks-history.md (branch `split4`) the tables; `bench/probes/probe_cache_policy.py` measures them again.
"""

from __future__ import annotations

GRID_LOADS: str | None = None
"""Policy of the input loads of the one-kernel split rows (`grid.py`)."""
SPLIT_LOADS: str | None = None
"""Policy of the input loads of the two-kernel split rows (`split.py`) but the last kernel's, whose loads
read the slices a last time."""
ROW_LOADS: str | None = None
"""Policy of the input loads of row and elementwise kernels (`schedule.py`; not matmul regions)."""


def hints(policy: str | None) -> dict[str, str]:
    """The `tt.load` properties of `policy` ("evict_first", "evict_last" or None)."""
    return {"evict": policy} if policy else {}
