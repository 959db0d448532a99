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
    python bench/bench_compile.py --scale 1000 4000 10000

`--profile` also prints one cold compile with TINYTON_PROFILE=1 (time per stage) per toolchain. `--scale N...`
instead times long programs (tests/scale_programs.py: one chain, chains with row reductions and many
outputs, many kernels, one statement per line) of N ops: CPU seconds to trace, fuse and generate the tt
kernels (issue 11: linear in N, under 10 s at 10,000).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
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
import tinyton as tt
imported = time.perf_counter()
import numpy as np  # after tinyton, which does not load it: "import" is tinyton's alone
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


def child(source: str, toolchain: str, cache: str, profile: bool = False) -> dict[str, float] | None:
    """One fresh process's figures (None, its error printed, if it failed)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)  # the GPU host's wheels too
    env = {**os.environ, "TINYTON_TOOLCHAIN": toolchain, "TINYTON_CACHE_DIR": cache, "PYTHONPATH": path}
    env.pop("TINYTON_CACHE", None)
    if profile:
        env["TINYTON_PROFILE"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD, source], env=env, capture_output=True, text=True, check=False)
    if profile or out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None


def scale(sizes: list[int]) -> None:
    """CPU seconds per stage of the long programs in tests/scale_programs.py."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import scale_programs

    from tinyton.compiler.collector import collector_paused
    from tinyton.compiler.program import fused_module
    from tinyton.frontend.tracing import trace
    from tinyton.lowering.fusion import fusion_to_kernels

    print("| program | ops | kernels | trace (s) | fuse (s) | generate kernels (s) | total (CPU s) | total (wall s) |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in ("chain", "mixed", "wide", "straight"):
        make, inputs = getattr(scale_programs, kind), getattr(scale_programs, f"{kind}_inputs", scale_programs.chain_inputs)
        fusion_to_kernels(fused_module(trace(make(10), inputs())))  # imports out of the figures
        for n in sizes:
            fn, args = make(n), inputs()
            with collector_paused():  # as compile_array_program does
                w0, t0 = time.perf_counter(), time.process_time()
                graph = trace(fn, args)
                t1 = time.process_time()
                fused = fused_module(graph)
                t2 = time.process_time()
                kernels = fusion_to_kernels(fused)
                t3, w1 = time.process_time(), time.perf_counter()
            ops = sum(1 for _ in graph.walk()) - 3  # less module, function and return
            print(f"| {kind} | {ops} | {len(kernels)} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} | {t3 - t0:.2f} "
                  f"| {w1 - w0:.2f} |", flush=True)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--scale", type=int, nargs="+", metavar="N")
    args = parser.parse_args()
    if args.scale:
        scale(args.scale)
        return
    rows, imports = [], []
    for toolchain in ("llvmlite", "mlir"):
        for name, source in PROGRAMS.items():
            cold, cold_ptx, warm, hit, recompile = [], [], [], [], []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory(prefix="tinyton-bench-") as cache:
                    first = child(source, toolchain, cache)
                    second = child(source, toolchain, cache)
                if first is None or second is None:
                    break
                cold.append(first["build"] + first["ptx"])
                cold_ptx.append(first["ptx"])
                recompile.append(first["recompile"])
                warm.append(second["build"] + second["ptx"])
                hit.append(second["ptx"])
                imports += [first["import"], second["import"]]
            if not cold:
                rows.append([name, toolchain, *["fails"] * 5])
                continue
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
