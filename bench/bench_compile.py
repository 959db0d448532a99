"""Compile time of array programs (issue 10 point 4, issue 11 "Scale"): cold, import, cache hit, recompile.

For rmsnorm, softmax and a 1000-op program, with each PTX toolchain (llvmlite, mlir), medians of `--runs`:

- cold: a fresh process with an empty disk cache traces, fuses, generates and compiles the kernels to PTX
  (time after `import tinyton`; "of which PTX": lowering, LLVM and the cache lookup);
- PTX on disk: a fresh process whose disk cache holds the PTX (tracing, fusion and codegen still run: the
  cache is keyed by the kernel's tt text); "of which PTX": the disk-cache hit itself;
- recompile: in a warm process, another row length (new kernels through every stage);
- import: `import tinyton` in a fresh process.

No GPU needed: PTX is produced, not loaded. Run from the repository root:

    python bench/bench_compile.py [--runs 5] [--profile]

`--profile` also prints one cold compile with TINYTON_PROFILE=1 (time per stage) per toolchain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAMS = {
    "rmsnorm": "def program(x, w):\n    return x * tt.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w\n",
    "softmax": "def program(x, w):\n    e = tt.exp(x - x.max(axis=-1, keepdims=True))\n    return e / e.sum(axis=-1, keepdims=True)\n",
    "1000 ops": (
        "def program(x, w):\n"
        "    for i in range(330):\n"
        "        x = tt.maximum(x * 0.999 + w, -4.0)\n"
        "    e = tt.exp(x - x.max(axis=-1, keepdims=True))\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n"
    ),
}

CHILD = r"""
import json, sys, time
start = time.perf_counter()
import numpy as np
import tinyton as tt
imported = time.perf_counter()
from tinyton.frontend.programs import compile_array_program
namespace = {"tt": tt}
exec(sys.argv[1], namespace)

def build(cols):
    args = [np.ones((32, cols), np.float32), np.ones(cols, np.float32)]
    return compile_array_program(tt.jit(namespace["program"]), args)

t0 = time.perf_counter()
program = build(2048)  # trace, fuse, generate the tt kernels
t1 = time.perf_counter()
for k in program.kernels():  # lower to PTX, or read it from the disk cache
    k.asm["ptx"]
t2 = time.perf_counter()
for k in build(1024).kernels():  # another row length: new kernels through every stage, imports warm
    k.asm["ptx"]
t3 = time.perf_counter()
print(json.dumps({"import": imported - start, "build": t1 - t0, "ptx": t2 - t1, "recompile": t3 - t2}))
"""


def child(source: str, toolchain: str, cache: str, profile: bool = False) -> dict[str, float]:
    env = {**os.environ, "TINYTON_TOOLCHAIN": toolchain, "TINYTON_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
    env.pop("TINYTON_CACHE", None)
    if profile:
        env["TINYTON_PROFILE"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD, source], env=env, capture_output=True, text=True, check=True)
    if profile:
        print(out.stderr, file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rows, imports = [], []
    for toolchain in ("llvmlite", "mlir"):
        for name, source in PROGRAMS.items():
            cold, cold_ptx, warm, hit, recompile = [], [], [], [], []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory(prefix="tinyton-bench-") as cache:
                    first = child(source, toolchain, cache)
                    second = child(source, toolchain, cache)
                cold.append(first["build"] + first["ptx"])
                cold_ptx.append(first["ptx"])
                recompile.append(first["recompile"])
                warm.append(second["build"] + second["ptx"])
                hit.append(second["ptx"])
                imports += [first["import"], second["import"]]
            rows.append([name, toolchain, ms(cold), ms(cold_ptx), ms(warm), f"{statistics.median(hit) * 1e3:.1f}",
                         ms(recompile)])
            print(f"  {name} / {toolchain} done", file=sys.stderr, flush=True)
        if args.profile:
            with tempfile.TemporaryDirectory(prefix="tinyton-bench-") as cache:
                child(PROGRAMS["rmsnorm"], toolchain, cache, profile=True)
    header = ["program", "toolchain", "cold compile (ms)", "of which PTX", "fresh process, PTX on disk (ms)",
              "of which PTX (disk hit)", "recompile in a warm process (ms)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\n`import tinyton`: {ms(imports)} ms (median of {len(imports)} fresh processes)")


if __name__ == "__main__":
    main()
