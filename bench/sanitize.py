"""compute-sanitizer over every tinyton kernel of the examples, the benchmarks, the Triton-language cases of
the tests and a slice of the differential fuzzer's programs (issues 11 and 25).

    python bench/sanitize.py                               # memcheck, then racecheck and synccheck
    python bench/sanitize.py --tools memcheck,initcheck --groups matmul,attention
    TINYTON_BACKEND=sim python bench/sanitize.py --plain   # the same runs without compute-sanitizer

A group is one process, so that one sanitizer start covers many kernels: the examples at small sizes
(bench/run_examples.py) or a benchmark script in one-shot mode (bench/common.py: small shapes with tails,
each measured tinyton function run once, no peers); except a group of GPU tests, whose tests run a process each,
side by side (racecheck took over 250 s for the `attention-forms` tests in one process, 35 s for them one a process,
sixteen cores). Per group (per test) the first tool runs alone first: it compiles
into this run's fresh kernel cache and tunes the `a @ b` tiles (every candidate then runs under it); the
other tools reuse the cache and run in parallel. torch's kernels (C++ names, `_Z...`) and cuBLAS's
(`...gemm...`) are not checked; a canary (a tinyton kernel that writes past its array) must be reported by
memcheck, so filters or a tool that silently check nothing fail the run. Prints one line per tool x group
and exits 1 on any error or hazard, a failed or timed-out run, or a missing summary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tinyton as tt
from tinyton.runtime import driver

ROOT = Path(__file__).resolve().parent.parent
PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu"]
"""A group of GPU tests: these arguments, then the test files (and a `-k` selection)."""
GROUPS = {
    "examples": ["bench/run_examples.py"],
    "microgpt": ["bench/run_examples.py", "microgpt"],
    "kernels": ["bench/bench_kernels.py"],
    "fusion": ["bench/bench_fusion.py"],
    "matmul": ["bench/bench_matmul.py"],
    "attention": ["bench/bench_attention.py"],
    "microgpt-bench-16": ["bench/bench_microgpt.py", "--embd", "16"],  # its one-shot sizes, a process each
    "microgpt-bench-64": ["bench/bench_microgpt.py", "--embd", "64"],
    "llama": ["examples/llama/generate.py", "--config", "tiny", "--tokens", "4"],  # decode: GEMV, greedy draw
    "language": ["bench/run_language_cases.py"],  # sort, gather, histogram, scans, atomics, descriptors...
    # split-K, flash-decoding: the last program of a tile finishes
    "splits": [*PYTEST, "tests/test_split_k.py", "tests/test_attention_decoding.py"],
    "fuzz": ["tests/fuzz/run.py", "--seed", "20261202", "--cases", "150"],  # the NumPy op set, model blocks
    "warp-specialized": [*PYTEST, "tests/test_warp_specialize.py"],
    "attention-forms": [*PYTEST, "tests/test_attention_warp_specialized.py", "tests/test_attention_backward.py", "-k",
                        "200-overlapped-pingpong or 77-128-keys or shape1-2-pingpong or head_dim_256 and 200"
                        " or no_key or 1024-64-True-float16 or 777-128-False-bfloat16 or persistent and 384"
                        " or persistent and 200 or ring and 200"],
    # FlashAttention-3's forward forms (ping-pong turns, overlapped products, 128- and 256-wide q in shared memory,
    # causal and ragged ends, an empty loop, persistent programs, a bias block in the ring) and the backward kernels (causal fp16, a ragged grouped-query bf16)
    "float8": [*PYTEST, "tests/test_fp8_matmul.py", "-k", "promoted_float8_tiles"],  # promoted dots in flight, each tile
    # float8 attention: the warp-specialised forms (TMA boxes of v's transposed copy) and a grouped-query v's copy
    "attention-float8": [*PYTEST, "tests/test_attention_float8.py", "-k",
                         "warp_specialized_float8 or grouped_values and 4-causal"],
}
GROUP_ENV = {"warp-specialized": {"TINYTON_ISOLATED": "1"}, "attention-forms": {"TINYTON_ISOLATED": "1"},
             "attention-float8": {"TINYTON_ISOLATED": "1"},
             "splits": {"TINYTON_TUNE": "0"}}
"""Environment a group adds: the warp-specialised GPU tests run in their own processes (tests/conftest.py), which
the sanitizer does not follow (`--target-processes application-only`); here they run in its process. The
one-shot benchmarks never reach those kernels: their products are too small for the tuner, which alone picks
the warp-specialised tiles. The split tests take the lowering's split KV loops, untuned: measured under a
sanitizer, whose slowdown is nothing like the GPU's own, the tuner chose one chunk for a decode step (H200,
2026-12-06: the tests' `grid[2] > 1` failed, 0 errors)."""
CANARY = "canary"
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
EXCLUDED = ("regex=^_Z", "kns=gemm")
"""Kernels not checked: C++-mangled names (torch, CUB, cuRAND) and cuBLAS's (the references' float64 matmuls)."""
TOOL_OPTIONS = {"memcheck": ["--report-api-errors", "no"]}
"""torch probes the driver with calls that fail by design; tinyton checks every call it makes itself."""
SUMMARY = re.compile(r"(ERROR SUMMARY|RACECHECK SUMMARY): (\d+) (error|hazard)")


@tt.jit
def out_of_bounds(x_ptr):
    """The canary: 64 lanes store into the array it is given (4 elements)."""
    lanes = tt.arange(0, 64)
    tt.store(x_ptr + lanes, lanes)


@dataclass
class Run:
    tool: str  # a compute-sanitizer tool, or "plain"
    group: str
    log: Path
    test: str = ""  # one test of a group of GPU tests (its pytest id); "": the whole group
    seconds: float = 0.0
    returncode: int | None = None  # None: timed out
    problems: int | None = None  # errors + hazards; None: no summary

    @property
    def clean(self) -> bool:
        if self.group == CANARY:  # the out-of-bounds store must be seen
            return bool(self.problems)
        if self.tool == "plain":
            return self.returncode == 0
        return self.returncode == 0 and self.problems == 0

    def line(self) -> str:
        if self.returncode is None:
            outcome = "timed out"
        elif self.tool == "plain":
            outcome = f"exit {self.returncode}"
        elif self.problems is None:
            outcome = f"no summary (exit {self.returncode})"
        else:
            what = ("hazard" if self.tool == "racecheck" else "error") + ("" if self.problems == 1 else "s")
            outcome = f"{self.problems} {what}" + (f", exit {self.returncode}" if self.returncode else "")
            if self.group == CANARY:
                outcome += " (expected: the canary's out-of-bounds store)" if self.problems else " (the canary was missed)"
        verdict = "ok" if self.clean else "FAIL"
        test = f"  {self.test.split('::')[-1]}" if self.test else ""
        return f"{self.tool:<10} {self.group:<17} {verdict:<5} {self.seconds:6.1f} s  {outcome}{test}"


def excerpt(log: Path, lines: int = 12) -> str:
    """What went wrong: the sanitizer's reports, else the end of the output (a traceback)."""
    text = log.read_text(errors="replace").splitlines()
    reports = [line for line in text if line.startswith("========= ") and "COMPUTE-SANITIZER" not in line]
    return "\n".join("    " + line for line in (reports[:lines] or text[-lines:]))


def command(tool: str, group: str, test: str = "") -> list[str]:
    script = [sys.executable, __file__, "--canary"] if group == CANARY else [sys.executable, *GROUPS[group]]
    if test:
        script = [sys.executable, *PYTEST, test]
    if tool == "plain":
        return script
    excluded = [option for value in EXCLUDED for option in ("--kernel-name-exclude", value)]
    return ["compute-sanitizer", "--tool", tool, "--print-limit", "20", "--target-processes", "application-only",
            *excluded, *TOOL_OPTIONS.get(tool, []), *script]  # fmt: skip


def execute(run: Run, env: dict[str, str], deadline: float) -> Run:
    start = time.perf_counter()
    with open(run.log, "w") as log:
        env = {**env, **GROUP_ENV.get(run.group, {})}
        process = subprocess.Popen(command(run.tool, run.group, run.test), cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            run.returncode = process.wait(timeout=max(0.0, deadline - start))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)  # the whole session this run started (the sanitizer and Python)
            process.wait()
    run.seconds = time.perf_counter() - start
    run.problems = problems(run.log.read_text(errors="replace"))
    return run


def problems(output: str) -> int | None:
    """Errors plus hazards in the summaries of a sanitizer's output; None without a summary."""
    counts = [int(m.group(2)) for m in SUMMARY.finditer(output)]
    return sum(counts) if counts else None


def tests_of(group: str, env: dict[str, str]) -> list[str]:
    """The pytest ids a group of GPU tests selects (one process each); [""] for any other group (one process)."""
    if GROUPS[group][: len(PYTEST)] != PYTEST:
        return [""]
    collect = [sys.executable, *GROUPS[group], "--collect-only", "--rootdir", str(ROOT)]  # ids relative to ROOT
    found = subprocess.run(collect, cwd=ROOT, env=env, capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "::" in line] or [""]


def schedule(tools: list[str], groups: list[str], jobs: int, env: dict[str, str], logs: Path, deadline: float) -> list[Run]:
    """Every tool on every group (on each of a test group's tests); a group's (test's) first tool before its others,
    which then run side by side."""
    done: list[Run] = []
    with ThreadPoolExecutor(jobs) as pool:

        def submit(tool: str, group: str, name: str, test: str = "") -> Future[Run]:
            return pool.submit(execute, Run(tool, group, logs / f"{tool}-{name}.log", test), env, deadline)

        pending = {submit(tools[0], group, f"{group}-{i}" if test else group, test)
                   for group in groups for i, test in enumerate(tests_of(group, env))}  # fmt: skip
        if tools[0] == "memcheck":
            pending.add(submit("memcheck", CANARY, CANARY))
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                run = future.result()
                print(run.line(), flush=True)
                done.append(run)
                if run.tool == tools[0] and run.group != CANARY:
                    name = run.log.stem.removeprefix(f"{run.tool}-")
                    pending |= {submit(tool, run.group, name, run.test) for tool in tools[1:]}
    return done


def compiled_kernels(cache: Path) -> set[str]:
    """The names of the kernels this run compiled (its cache's entries)."""
    metadata = (json.loads(path.read_text()) for path in cache.glob("*/*.json"))
    return {meta["entry"]["name"] for meta in metadata if "entry" in meta}  # (not the tuning records)


def excluded(name: str) -> bool:
    return any(re.search(value[6:], name) if value.startswith("regex=") else value[4:] in name for value in EXCLUDED)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default="memcheck,racecheck,synccheck", help=f"comma-separated, of {', '.join(TOOLS)}")
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument("--plain", action="store_true", help="run the groups without compute-sanitizer")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="runs at once")
    parser.add_argument("--time-limit", type=float, default=540, help="seconds for everything: later runs are cut off")
    parser.add_argument("--log-dir", type=Path, default=None, help="where each run's output goes (default: a temporary folder)")
    parser.add_argument("--canary", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.canary:
        out_of_bounds[(1,)](np.zeros(4, np.int32))
        driver.synchronize()
        return 0
    tools = ["plain"] if args.plain else args.tools.split(",")
    groups = args.groups.split(",")
    unknown = (set(tools) - {"plain", *TOOLS}) | (set(groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown tool or group: {', '.join(sorted(unknown))}")
    if not args.plain and shutil.which("compute-sanitizer") is None:
        parser.error("compute-sanitizer is not on PATH (it comes with the CUDA toolkit); --plain runs without it")
    logs = args.log_dir or Path(tempfile.mkdtemp(prefix="tinyton-sanitize-"))
    logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tinyton-sanitize-cache-") as cache:
        return report(args, tools, groups, logs, Path(cache))


def report(args: argparse.Namespace, tools: list[str], groups: list[str], logs: Path, cache: Path) -> int:
    """Run everything with a fresh kernel cache; print the summary; 1 when anything failed."""
    env = dict(os.environ, TINYTON_BENCH_ONESHOT="1", TINYTON_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1",
               PYTORCH_NO_CUDA_MEMORY_CACHING="1",  # every tensor its own allocation: memcheck sees its bounds
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    env.setdefault("TINYTON_TOOLCHAIN", "llvmlite")  # in-process PTX: ~2.5x faster compiles than llc
    if not args.plain:
        env["TINYTON_BACKEND"] = "cuda"
    print(f"{len(tools)} tool(s) x {len(groups)} group(s), {args.jobs} at once; logs in {logs}", flush=True)
    start = time.perf_counter()
    runs = schedule(tools, groups, args.jobs, env, logs, start + args.time_limit)
    failed = [run for run in runs if not run.clean]
    names = compiled_kernels(cache)
    hidden = sorted(name for name in names if excluded(name))
    if names:
        print(f"{len(names)} tinyton kernels compiled" + (f"; excluded from checking: {', '.join(hidden)}" if hidden else ""))
    for run in failed:
        print(f"FAIL {run.tool} {run.group} ({run.log}):\n{excerpt(run.log)}")
    print(f"{len(runs) - len(failed)}/{len(runs)} runs clean in {time.perf_counter() - start:.0f} s")
    return 1 if failed or hidden else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
