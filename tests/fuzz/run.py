"""Run generated programs fused, unfused and on the NumPy reference, and report every mismatch.

Each program's source is written to a file (so tracebacks and CompilationErrors name its file:line),
imported as a module and decorated with `tt.jit`; the fused run is the plain call, the unfused one
`prog.compile(*inputs, fuse=False)(*inputs)`. Both must match the reference of fuzz/reference.py (shape,
dtype, NaN positions, values within the propagated error bound); a compile error is a mismatch too.

    python tests/fuzz/run.py --seed 0 --cases 10000          # the backend: TINYTON_BACKEND (auto: GPU if any)
    python tests/fuzz/run.py --seed 0 --index 123 --show     # one case, with its source
    python tests/fuzz/run.py --cases 10000 --jobs 16         # in 16 processes (GPU hosts: compiles dominate)
    python tests/fuzz/run.py --tiles drawn --cases 2000      # matmul tiles drawn from the tuner's candidates

Without a tuner (the simulator, or `TINYTON_TUNE=0`) every product takes the untuned default tiles, which a
GPU's tuner rarely keeps; `--tiles drawn` (`TINYTON_FUZZ_TILES=drawn`) gives each product tiles drawn from
the tuner's candidates for it instead (the GEMV and skinny forms of few-row products included, and with them
launch groups; and split-K forms over smaller K steps, SPLIT_SHARE of them), seeded by the case and the
product's shape, so both backends check the tiles a GPU runs.
"""

from __future__ import annotations

import argparse
import builtins
import importlib.util
import multiprocessing
import os
import random
import sys
import tempfile
import time
import traceback
import types
import warnings
from concurrent.futures import ProcessPoolExecutor, TimeoutError, as_completed
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from unittest import mock

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.generate import Case, generate
from fuzz.reference import Ref, compare
from fuzz.reference_ops import SHIM

import tinyton as tt
import tinyton.compiler.program as program_module
from tinyton.dialects.tt import DOT_MIN
from tinyton.intmath import next_power_of_2
from tinyton.lowering.fusion.matmul_tiles import MatmulProblem, MatmulTiles, candidates
from tinyton.runtime import driver

DEFAULT_SEED = 20261123
DEFAULT_CASES = 2000
TILES_ENV = "TINYTON_FUZZ_TILES"
SPLIT_SHARE = 0.3
"""Drawn tiles that also split K (`split_k.py`): the tuner's split forms need a K of many steps, which the
fuzzer's products rarely have, so they are drawn over smaller K steps."""


@dataclass
class Outcome:
    case: Case
    problems: list[str]

    def report(self) -> str:
        shapes = ", ".join(f"{x.dtype}{list(x.shape)}" for x in self.case.inputs)
        return (
            f"case --seed {self.case.seed} --index {self.case.index} ({self.case.kind}; inputs {shapes}):\n"
            + "".join(f"  {p}\n" for p in self.problems)
            + "".join(f"    | {line}\n" for line in self.case.source.splitlines())
        )


def load(case: Case, directory: Path) -> types.FunctionType:
    path = directory / f"{case.name}.py"
    path.write_text(case.source)
    spec = importlib.util.spec_from_file_location(case.name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, case.name)


def reference(fn: types.FunctionType, inputs: list[np.ndarray]) -> tuple[list[Ref], bool]:
    """The program's outputs on the reference, and whether it returns a tuple."""
    ref_fn = types.FunctionType(fn.__code__, {"tt": SHIM, "__builtins__": builtins}, fn.__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice, overflow: NumPy's values are meant
        out = ref_fn(*(Ref(x, 0.0) for x in inputs))
    return (list(out), True) if isinstance(out, tuple) else ([out], False)


def drawn_tiles(case: Case) -> AbstractContextManager:
    """Matmul tiles drawn from the tuner's candidates, per case and product shape (`TINYTON_FUZZ_TILES=drawn`), a
    Hopper GPU's (warp-specialised persistent tiles, padded decode tiles) on the simulator; otherwise the
    compiler's own choice."""
    if os.environ.get(TILES_ENV, "") != "drawn":
        return nullcontext()

    hopper = not driver.is_available() or driver.device().compute_capability[0] == 9  # the simulator stands in for one

    def choose(p: MatmulProblem) -> MatmulTiles:
        options = candidates(p, warp_specialize=hopper, hopper=hopper)
        rng = random.Random(f"{case.seed}:{case.index}:{p.shape_class()}:{p.dots}")
        tiles = options[rng.randrange(len(options))]
        if rng.random() < SPLIT_SHARE:  # split-K, which the tuner tries on larger K only, over K steps of a quarter
            quarter = max(DOT_MIN, next_power_of_2(p.k) // 4)
            tiles = replace(tiles, block_k=min(tiles.block_k, quarter), split_k=rng.choice([2, 3, 4]))
        return tiles

    return mock.patch.object(program_module, "matmul_tiles", choose)


def check(case: Case, directory: Path) -> Outcome:
    fn = load(case, directory)
    expected, is_tuple = reference(fn, case.inputs)
    program = tt.jit(fn)
    problems: list[str] = []
    for label, run in (
        ("fused", lambda: program(*case.inputs)),
        ("unfused", lambda: program.compile(*case.inputs, fuse=False)(*case.inputs)),
    ):
        try:
            with np.errstate(all="ignore"), drawn_tiles(case):
                got = run()
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            tb = traceback.format_exception(type(e), e, e.__traceback__, limit=-3)
            problems.append(f"{label}: raised {type(e).__name__}: {''.join(tb[-1:]).strip()[:600]}")
            continue
        outs = list(got) if isinstance(got, tuple) else [got]
        if len(outs) != len(expected) or isinstance(got, tuple) != is_tuple:
            problems.append(f"{label}: returned {len(outs)} values ({type(got).__name__}), expected {len(expected)}")
            continue
        for i, (g, r) in enumerate(zip(outs, expected)):
            diff = compare(g, r)
            if diff:
                problems.append(f"{label}: output {i}: {diff}")
    return Outcome(case, problems)


def run(seed: int, indices: range, stop_after: int | None = None) -> tuple[list[Outcome], int]:
    failures: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="tinyton-fuzz-") as tmp:
        for i in indices:
            outcome = check(generate(seed, i), Path(tmp))
            if outcome.problems:
                failures.append(outcome)
                if stop_after and len(failures) >= stop_after:
                    break
    return failures, len(indices)


def _run_slice(seed: int, start: int, stop: int) -> tuple[list[str], int]:
    failures, count = run(seed, range(start, stop))
    return [f.report() for f in failures], count


def run_parallel(seed: int, indices: range, jobs: int, time_limit: float | None = None) -> tuple[list[str], int]:
    """`run` over `jobs` processes (each with its own CUDA context); kernels compile on every core. Slices
    not started within `time_limit` seconds are cancelled (the count says how many cases ran)."""
    step = max(1, min(25, len(indices) // (4 * jobs)))
    deadline = time.monotonic() + time_limit if time_limit else None
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_run_slice, seed, i, min(i + step, indices.stop)) for i in range(indices.start, indices.stop, step)]
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            for _ in as_completed(futures, timeout=left):
                pass
        except TimeoutError:
            for future in futures:
                future.cancel()  # slices under way still finish
        results = [f.result() for f in futures if not f.cancelled()]
    return [r for found, _ in results for r in found], sum(n for _, n in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--cases", type=int, default=int(os.environ.get("TINYTON_FUZZ_CASES", DEFAULT_CASES)))
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--index", type=int, help="run this one case")
    parser.add_argument("--show", action="store_true", help="print the case's source")
    parser.add_argument("--max-failures", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--time-limit", type=float, default=None, help="with --jobs: start no slice after this many seconds")
    parser.add_argument("--tiles", choices=["default", "drawn"], default=os.environ.get(TILES_ENV) or "default",
                        help="matmul tiles: the compiler's, or drawn from the tuner's candidates")
    args = parser.parse_args()
    os.environ[TILES_ENV] = args.tiles  # the worker processes read it too
    indices = range(args.index, args.index + 1) if args.index is not None else range(args.start, args.start + args.cases)
    if args.show:
        for i in indices:
            print(generate(args.seed, i).source)
    start = time.perf_counter()
    if args.jobs > 1:
        reports, count = run_parallel(args.seed, indices, args.jobs, args.time_limit)
    else:
        failures, count = run(args.seed, indices, args.max_failures)
        reports = [f.report() for f in failures]
    for report in reports:
        print(report)
    failures = reports
    print(f"{count} cases, seed {args.seed}, tiles {args.tiles}, {len(failures)} failing, "
          f"{time.perf_counter() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
