"""Import time of two trees on a noisy host: per module the least self time over N fresh interpreters, summed.

    cd /tmp && python bench/import_time.py OLD_TREE NEW_TREE [RUNS]    (run outside both trees)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

CASES = [
    ("import numpy, ml_dtypes", "import numpy, ml_dtypes"),
    ("import tinyton", "import tinyton"),
    ("import tinyton.language as tl; @tt.jit", "import tinyton as tt, tinyton.language as tl\n@tt.jit\ndef f(x): return x + 1"),
]


def least_self_times(code: str, tree: str, runs: int) -> dict[str, int]:
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1")
    best: dict[str, int] = {}
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, check=True, capture_output=True, text=True).stderr
        for m in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)\n", err):
            best[m.group(2)] = min(best.get(m.group(2), 1 << 60), int(m.group(1)))
    return best


def main() -> None:
    old, new, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 12
    for label, code in CASES:
        row = []
        for tree in (old, new):
            best = least_self_times(code, tree, runs)
            xdsl = sum(v for k, v in best.items() if k.startswith("xdsl"))
            row.append(f"{sum(best.values()) / 1e3:5.0f} ms (xdsl {xdsl / 1e3:3.0f} ms, {len(best)} modules)")
        print(f"{label:42s} {row[0]} | {row[1]}")


if __name__ == "__main__":
    main()
