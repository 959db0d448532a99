"""Kernels compiled in worker processes ahead of a tuner's measurements, into the disk cache.

A tuner compiles every candidate before it times them (compiler/autotune.py): a dozen to two dozen kernels a
shape, each lowered to PTX one after another, ~0.35 s apiece on the development machine and several times that on
a GPU host's slower cores (half of it xDSL's lowering in Python, half LLVM). `compile_ahead` hands the candidates'
tt modules, as text, to a pool of worker processes that compile them into the disk cache; the tuner's own compile of
each candidate is then a cache hit. The workers compile for the target the calling process would (its GPU's arch,
its toolchain, TMA on or off: the same cache keys), and nothing depends on them: a module they did not compile, or
compiled to another key, is compiled by the caller as before.

`TINYTON_COMPILE_JOBS=N` turns it on with N workers (unset, 0 or 1: off; scripts/gpu-env.sh sets it for the
benchmarks). The pool starts on first use and lives as long as the process. Its workers are spawned, so that none
inherits the caller's CUDA context; like every spawned process they import the caller's main script, whose work
must therefore sit under `if __name__ == "__main__":`. A pool that breaks (a worker that dies) is given up for the
rest of the process, with a line on stderr: the caller compiles as without it.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tinyton.compiler import target as targets
from tinyton.compiler.kernel import compile_module
from tinyton.dialects import tinyton_context
from tinyton.lowering.ptx import resolve_toolchain
from tinyton.runtime import cache, driver

JOBS_ENV = "TINYTON_COMPILE_JOBS"
MIN_MODULES = 3
"""Fewer modules than this are compiled by the caller: the pool's round trip would cost what it saves."""

_pool: ProcessPoolExecutor | None = None
_broken = False


def jobs() -> int:
    """Worker processes `compile_ahead` may use (`TINYTON_COMPILE_JOBS`; 0 when unset or not a number)."""
    value = os.environ.get(JOBS_ENV, "").strip()
    return max(0, int(value)) if value.isdigit() else 0


def available(count: int) -> bool:
    """Whether `compile_ahead` would compile `count` modules in workers: at least MIN_MODULES of them, two workers
    or more, the disk cache on and the pool not given up."""
    return count >= MIN_MODULES and jobs() > 1 and not _broken and cache.default_cache().disk


def compile_ahead(modules: Sequence[tuple[ModuleOp, int]]) -> None:
    """Compile each (tt module, num_warps) to PTX in the worker processes, into the disk cache, and wait for them
    (nothing unless `available`)."""
    global _broken
    if not available(len(modules)):
        return
    texts = list(dict.fromkeys((str(module), warps) for module, warps in modules))
    try:
        list(_workers().map(_compile, texts))
    except Exception as e:  # noqa: BLE001 - a dead worker (BrokenProcessPool): compile here from now on
        _broken = True
        print(f"tinyton: the compile workers failed ({type(e).__name__}: {e}); compiling in this process",
              file=sys.stderr)
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)


def _workers() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        target = {
            targets.ENV: targets.requested_arch() or driver.default_arch(),
            "TINYTON_TOOLCHAIN": resolve_toolchain(None),
            "TINYTON_CACHE_DIR": str(cache.default_cache().directory),
        }
        _pool = ProcessPoolExecutor(jobs(), mp_context=get_context("spawn"), initializer=_enter, initargs=(target,))
        atexit.register(_pool.shutdown, cancel_futures=True)
    return _pool


def _enter(environment: dict[str, str]) -> None:
    """A worker compiles for the caller's target, into its cache, and never touches a GPU."""
    os.environ.update(environment)


def _compile(item: tuple[str, int]) -> None:
    """Compile one module's text to PTX, into the disk cache."""
    text, num_warps = item
    try:
        compile_module(Parser(tinyton_context(), text).parse_module(), num_warps=num_warps).asm["ptx"]
    except Exception:  # noqa: BLE001 - the caller compiles it again, and says what is wrong (a tuner drops it)
        pass
