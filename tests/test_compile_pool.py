"""Kernels compiled ahead in worker processes (tinyton/compiler/compile_pool.py): a tuner's candidates, compiled
into the disk cache by the pool for the caller's target, are cache hits when the caller compiles them (no lowering
in the caller), and nothing depends on the workers: with the pool off, or for too few modules, the caller compiles."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tinyton.lowering.tt_to_llvm as tt_to_llvm
from tinyton.compiler import compile_module, compile_pool
from tinyton.compiler.tuning_runs import compile_candidates_ahead
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime import cache

TILES = [MatmulTiles(64, 64, 32, 4, 3), MatmulTiles(128, 128, 64, 8, 3), MatmulTiles(64, 128, 64, 4, 4)]


def linear(x, w):
    return x @ w.T


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """The disk cache in `tmp_path` (the process-wide one is made on first use), and no pool left behind."""
    monkeypatch.setenv("TINYTON_CACHE_DIR", str(tmp_path))
    cache.default_cache.cache_clear()
    yield tmp_path
    if compile_pool._pool is not None:
        compile_pool._pool.shutdown()
        compile_pool._pool = None
    cache.default_cache.cache_clear()


def _kernels(module, tiles):
    (spec,) = fusion_to_kernels(fuse_module(module.clone()), choose_tiles=lambda _: tiles)
    return spec


def _module():
    return trace(linear, [np.zeros((512, 256), ml_dtypes.bfloat16), np.zeros((384, 256), ml_dtypes.bfloat16)])


def test_candidates_compiled_ahead_are_cache_hits(fresh_cache, monkeypatch):
    monkeypatch.setenv(compile_pool.JOBS_ENV, "2")
    module = _module()
    compile_candidates_ahead(module, True, "choose_tiles", TILES)
    assert len(list(fresh_cache.glob("*/*.ptx"))) == len(TILES)

    def no_lowering(*args, **kwargs):
        raise AssertionError("lowered in the caller: the worker's PTX was not found")

    monkeypatch.setattr(tt_to_llvm, "lower_to_llvm", no_lowering)
    for tiles in TILES:
        spec = _kernels(module, tiles)
        assert ".target sm_90" in compile_module(spec.module, num_warps=spec.num_warps).asm["ptx"]


def test_a_broken_pool_is_given_up_and_the_caller_compiles(fresh_cache, monkeypatch, capsys):
    monkeypatch.setenv(compile_pool.JOBS_ENV, "2")

    class Broken:
        shut = False

        def map(self, *args):
            raise RuntimeError("A process in the process pool was terminated abruptly")

        def shutdown(self, wait, cancel_futures):
            self.shut = True

    broken = Broken()
    monkeypatch.setattr(compile_pool, "_pool", broken)
    monkeypatch.setattr(compile_pool, "_broken", False)
    compile_pool.compile_ahead([(_kernels(_module(), t).module, 4) for t in TILES])
    assert compile_pool._broken and broken.shut and "compile workers failed" in capsys.readouterr().err
    compile_pool.compile_ahead([(_kernels(_module(), t).module, 4) for t in TILES])  # given up: no second try
    monkeypatch.setattr(compile_pool, "_pool", None)


@pytest.mark.parametrize("jobs, count", [("0", 3), ("", 3), ("2", 2)], ids=["pool off", "unset", "too few modules"])
def test_the_caller_compiles_without_the_pool(fresh_cache, monkeypatch, jobs, count):
    monkeypatch.setenv(compile_pool.JOBS_ENV, jobs)
    compile_candidates_ahead(_module(), True, "choose_tiles", TILES[:count])
    assert compile_pool._pool is None and not list(fresh_cache.glob("*/*.ptx"))
