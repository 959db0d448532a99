"""Launch groups (tinyton/lowering/fusion/launch_groups.py): independent one-row products in the GEMV form run
as one launch, each over its own programs, with NumPy's results; a kernel reading what another writes (its
result, or the array a put writes into) keeps its own launch; the grouped kernel assembles on both PTX paths."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyton as tt
import tinyton.compiler.program as program_module
import tinyton.frontend.programs as programs_module
import tinyton.lowering.fusion.matmul_tiles as tiles_module
from tinyton.compiler import compile_module
from tinyton.lowering.fusion import KernelGroup
from tinyton.lowering.fusion.launch_groups import weight_bytes_per_program
from tinyton.lowering.ptx import assemble_ptx, mlir_path
from tinyton.lowering.ptx.toolchain import find_tool

BF16 = ml_dtypes.bfloat16
GEMV = tiles_module.MatmulTiles(1, 8, 64, 4, 3)


@pytest.fixture(params=["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def gemv_tiles(request, monkeypatch):
    """One-row products in the GEMV form (the tuner's pick for a decode step on a GPU; the simulator's default
    tiles are tensor-core ones), programs compiled afresh, on the backend of the parameter."""
    monkeypatch.setenv("TINYTON_BACKEND", request.param)
    monkeypatch.setattr(program_module, "matmul_tiles",
                        lambda p: GEMV.fit(p) if p.m == 1 else tiles_module.default_tiles(p))
    monkeypatch.setattr(programs_module, "_PROGRAMS", type(programs_module._PROGRAMS)())


def projections(x, wq, wkv, b):
    """Grouped-query attention's q and k/v projections of one normed row: two widths, two regions."""
    h = (x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-5)).astype(tt.bfloat16)
    return (h @ wq.T).astype(tt.float32) + b, (h @ wkv.T).astype(tt.float32)


def chained(x, w1, w2):
    return (x @ w1.T) @ w2.T


def read_then_written(x, w, cache, pos):
    """The first product reads `cache` as its weight; the second writes a row of it (a put, in place)."""
    y = x @ cache.T
    cache[pos] = (x @ w.T)[0]
    return y


def _inputs(rng, *shapes):
    return [rng.standard_normal(s).astype(np.float32) if i == 0 else rng.standard_normal(s).astype(BF16)
            for i, s in enumerate(shapes)]


def test_independent_projections_are_one_launch(gemv_tiles):
    rng = np.random.default_rng(0)
    x, wq, wkv = _inputs(rng, (1, 256), (384, 256), (128, 256))
    b = rng.standard_normal(384).astype(np.float32)
    fn = tt.jit(projections)
    q, kv = fn(x, wq, wkv, b)
    program = next(iter(programs_module._PROGRAMS[projections].values()))
    assert program.num_launches == 1 and isinstance(program.steps[0].launch, KernelGroup)
    assert program.steps[0].launch.kind == "matmul_epilogue+matmul_epilogue"
    h = (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)).astype(BF16).astype(np.float32)
    np.testing.assert_allclose(np.asarray(q), (h @ wq.astype(np.float32).T).astype(BF16).astype(np.float32) + b,
                               rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(np.asarray(kv), (h @ wkv.astype(np.float32).T).astype(BF16).astype(np.float32),
                               rtol=2e-2, atol=2e-2)


def test_dependent_products_keep_their_launches(gemv_tiles):
    rng = np.random.default_rng(1)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((1, 64), (96, 64), (32, 96)))
    got = tt.jit(chained)(x, w1, w2)
    program = next(iter(programs_module._PROGRAMS[chained].values()))
    assert program.num_launches == 2 and not any(isinstance(s.launch, KernelGroup) for s in program.steps)
    np.testing.assert_allclose(np.asarray(got), (x @ w1.T) @ w2.T, rtol=1e-4, atol=1e-4)


def test_a_kernel_writing_what_the_other_reads_keeps_its_launch(gemv_tiles):
    rng = np.random.default_rng(2)
    x, w, cache = (rng.standard_normal(s).astype(np.float32) for s in ((1, 64), (48, 64), (40, 48)))
    x48 = rng.standard_normal((1, 48)).astype(np.float32)
    w48 = rng.standard_normal((48, 48)).astype(np.float32)
    want_cache = cache.copy()
    want_y = x48 @ want_cache.T
    want_cache[3] = (x48 @ w48.T)[0]
    y = tt.jit(read_then_written)(x48, w48, cache, 3)
    program = next(iter(programs_module._PROGRAMS[read_then_written].values()))
    assert not any(isinstance(s.launch, KernelGroup) for s in program.steps)
    np.testing.assert_allclose(np.asarray(y), want_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cache, want_cache, rtol=1e-4, atol=1e-4)


def query_then_key_value(x, wq, wk, wv):
    """A query projection, then a key/value region of two sibling dots: each of its programs reads twice the bytes."""
    return x @ wq.T, (x @ wk.T) * 2.0, x @ wv.T


def test_the_longest_programs_take_the_first_ids(gemv_tiles):
    """The key/value part (two dots a program) runs first in the launch, whatever the program's order."""
    rng = np.random.default_rng(4)
    x, wq, wk, wv = (rng.standard_normal(s).astype(BF16) for s in ((1, 256), (384, 256), (64, 256), (64, 256)))
    q, k, v = tt.jit(query_then_key_value)(x, wq, wk, wv)
    program = next(iter(programs_module._PROGRAMS[query_then_key_value].values()))
    (step,) = program.steps
    first, second = step.launch.parts
    assert weight_bytes_per_program(first) == 2 * weight_bytes_per_program(second)
    xf = x.astype(np.float32)
    for got, w, scale in ((q, wq, 1.0), (k, wk, 2.0), (v, wv, 1.0)):
        want = (xf @ w.astype(np.float32).T).astype(BF16).astype(np.float32) * scale
        np.testing.assert_allclose(np.asarray(got).astype(np.float32), want, rtol=2e-2, atol=2e-2)


def three_products(x, w1, w2, w3):
    """Three one-row products of one input, each with its own epilogue: one launch when all are GEMV kernels."""
    return tt.tanh(x @ w1.T), (x @ w2.T) * 2.0, tt.maximum(x @ w3.T, 0.0)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.sampled_from([8, 64, 100, 256]),
       widths=st.lists(st.sampled_from([40, 96, 136, 200]), min_size=3, max_size=3, unique=True),
       block=st.sampled_from([(4, 256), (8, 64), (16, 128)]), dtype=st.sampled_from([np.float32, BF16]))
def test_grouped_products_match_numpy_at_any_shape(monkeypatch, k, widths, block, dtype):
    """Any widths (three distinct ones: equal widths would be sibling products of one region; programs per
    part not a multiple of anything), K steps and dtypes: each part's programs compute its own columns, none
    reads or writes another's."""
    monkeypatch.setattr(program_module, "matmul_tiles",
                        lambda p: tiles_module.MatmulTiles(1, *block, 4, 3).fit(p))
    monkeypatch.setattr(programs_module, "_PROGRAMS", type(programs_module._PROGRAMS)())
    rng = np.random.default_rng(k * 1000 + sum(widths))
    x = rng.standard_normal((1, k)).astype(dtype)
    ws = [rng.standard_normal((n, k)).astype(dtype) for n in widths]
    got = tt.jit(three_products)(x, *ws)
    program = next(iter(programs_module._PROGRAMS[three_products].values()))
    assert program.num_launches == 1
    xf = x.astype(np.float64)
    want = [np.tanh(xf @ ws[0].astype(np.float64).T), (xf @ ws[1].astype(np.float64).T) * 2.0,
            np.maximum(xf @ ws[2].astype(np.float64).T, 0.0)]
    tol = 2e-2 if dtype is BF16 else 1e-4
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g).astype(np.float64), w, rtol=tol, atol=tol * np.sqrt(k))


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("toolchain", [
    pytest.param("mlir", marks=pytest.mark.skipif(not mlir_path.available(), reason="no LLVM 22 tools")), "llvmlite"])
def test_grouped_kernel_assembles(monkeypatch, toolchain: str):
    monkeypatch.setattr(program_module, "matmul_tiles", lambda p: GEMV.fit(p))
    rng = np.random.default_rng(3)
    x, wq, wkv = _inputs(rng, (1, 256), (384, 256), (128, 256))
    program = tt.jit(projections).compile(x, wq, wkv, np.zeros(384, np.float32))
    (step,) = program.steps
    kernel = compile_module(step.launch.module.clone(), num_warps=step.launch.num_warps, arch="sm_90",
                            toolchain=toolchain)
    assert step.grid == (sum(p.grid[0] for p in step.launch.parts), 1, 1)
    assert assemble_ptx(kernel.asm["ptx"], "sm_90")
