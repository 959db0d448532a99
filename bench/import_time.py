"""Import time, in fresh interpreters on a noisy host.

With one tree (or none: the tinyton on the path): wall-clock medians over RUNS fresh interpreters of
`import numpy`, `import numpy, ml_dtypes`, `import tinyton`, and **tinyton above numpy**: the time of
`import tinyton` in an interpreter that has already imported numpy (what tinyton itself adds; numpy alone
takes 255-474 ms on the GPU hosts). With two trees: per module the least self time over RUNS interpreters
(`-X importtime`), summed, side by side. Either way it names the heavy packages `import tinyton` loaded
(none, since NumPy left the light path: issue 10).

    python bench/import_time.py [TREE] [--runs N]
    cd /tmp && python bench/import_time.py OLD_TREE NEW_TREE [--runs N]    (run outside both trees)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
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


HEAVY = ("numpy", "ml_dtypes", "networkx", "xdsl", "torch", "cuda")
"""Packages that `import tinyton` has no need of (NumPy alone: 237-327 ms on the GPU hosts)."""


def heavy_loaded(tree: str | None) -> list[str]:
    """The HEAVY packages in sys.modules after `import tinyton` in a fresh interpreter."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    code = f"import sys, tinyton\nprint(*sorted({{n.partition('.')[0] for n in sys.modules}} & set({HEAVY!r})))"
    return subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout.split()


WALL = {
    "import numpy": ("", "import numpy"),
    "import numpy, ml_dtypes": ("", "import numpy, ml_dtypes"),
    "import tinyton": ("", "import tinyton"),
    "tinyton above numpy (numpy already imported)": ("import numpy", "import tinyton"),
}
"""Label -> (what runs first, untimed; what is timed)."""


def wall_ms(before: str, timed: str, tree: str | None, runs: int) -> list[float]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if tree is not None:
        env["PYTHONPATH"] = tree
    code = f"import time\n{before}\nt = time.perf_counter()\n{timed}\nprint(time.perf_counter() - t)"
    return [float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                 text=True).stdout) * 1e3 for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="one tree (wall-clock figures) or two (per-module comparison)")
    parser.add_argument("--runs", type=int, default=12)
    args = parser.parse_args()
    if len(args.trees) == 2:
        compare(*args.trees, args.runs)
        return
    tree = args.trees[0] if args.trees else None
    print(f"| what | ms, median of {args.runs} fresh interpreters (least-largest) |\n|---|---|")
    for label, (before, timed) in WALL.items():
        ms = wall_ms(before, timed, tree, args.runs)
        print(f"| {label} | {statistics.median(ms):.1f} ({min(ms):.1f}-{max(ms):.1f}) |")
    print(f"\nheavy packages loaded by `import tinyton`: {' '.join(heavy_loaded(tree)) or 'none'}")


def compare(old: str, new: str, runs: int) -> None:
    for label, code in CASES:
        row = []
        for tree in (old, new):
            best = least_self_times(code, tree, runs)
            xdsl = sum(v for k, v in best.items() if k.startswith("xdsl"))
            row.append(f"{sum(best.values()) / 1e3:5.0f} ms (xdsl {xdsl / 1e3:3.0f} ms, {len(best)} modules)")
        print(f"{label:42s} {row[0]} | {row[1]}")
    loaded = [" ".join(heavy_loaded(tree)) or "none" for tree in (old, new)]
    print(f"{'heavy packages loaded by `import tinyton`':42s} {loaded[0]} | {loaded[1]}")


if __name__ == "__main__":
    main()
