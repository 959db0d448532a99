"""bench/regress.py, the benchmark regression guard: parsing tables, the direction of each unit, flags."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import regress  # noqa: E402

TABLES = """
### Fused array programs, fp32 (GB/s, one read + one write; µs for the latency-bound shape)

| program | unit | tinyton | Triton |
|---|---|---|---|
| softmax 4096x4096 | GB/s | 2700.0 | 2800.0 |
| softmax 32x2048 | µs | 5.0 | 5.4 |

### Launch overhead (µs per launch)

| what | µs |
|---|---|
| tinyton kernel[grid](...) (cached) | 6.0 |
| Triton kernel[grid](...) | 11.0 |
"""


def test_only_tinyton_figures_are_kept_with_their_rows():
    figures = regress.parse_tables(TABLES)
    assert len(figures) == 3
    assert figures["Launch overhead (µs per launch) | tinyton kernel[grid](...) (cached) | µs"] == 6.0


def test_times_drop_when_they_grow_and_rates_when_they_shrink():
    recorded = regress.parse_tables(TABLES)
    now = {k: v * (1.2 if regress.lower_is_better(k) else 0.8) for k, v in recorded.items()}
    rows, drops = regress.compare(now, recorded)
    assert drops == 3 and all(row[-1] == "DROP" for row in rows)
    slightly_worse = {k: v * (1.05 if regress.lower_is_better(k) else 0.95) for k, v in recorded.items()}
    assert regress.compare(slightly_worse, recorded)[1] == 0
