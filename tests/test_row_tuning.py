"""Shapes of fused row kernels measured on first use and kept in the disk cache (issue 10, point 3): the
matmul tiles' `Tuner` over `row_shapes.candidates` (warps, rows per program, whole or looped rows), keyed by
GPU name, dtype, program fingerprint and (rows, row length) class; the defaults without a GPU or with
TINYTON_TUNE=0. Measured here by stand-ins; every candidate is checked against NumPy on the simulator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from fusion_helpers import execute

import tinyton as tt
from tinyton.compiler import program as compiler_program
from tinyton.compiler import row_tuning
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.row_shapes import (
    RowProblem,
    RowShape,
    candidates,
    default_row_shape,
)
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime.cache import KernelCache


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def region(fn, *args):
    """The (one) row region of `fn` traced on `args`, and its problem as the lowering describes it."""
    module = fuse_module(fn.compile(*args).graph.clone(), fuse=True)
    seen = []
    fusion_to_kernels(module, choose_rows=lambda p: seen.append(p) or default_row_shape(p))
    (problem,) = seen
    return problem


@dataclass
class FakeDevice:
    name: str
    sm_count: int = 132


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    """A pretend GPU with an empty tuning cache; `gpu.measured` lists what the stand-in timed (8 warps on
    whole rows is the fastest)."""
    device = FakeDevice("Pretend H100")
    monkeypatch.setattr(row_tuning.driver, "is_available", lambda: True)
    monkeypatch.setattr(row_tuning.driver, "device", lambda: device)
    monkeypatch.delenv("TINYTON_TUNE", raising=False)
    monkeypatch.setattr(row_tuning.TUNER, "cache", KernelCache(tmp_path, disk=True))
    measured: list[RowShape] = []

    def timer(p, shape, samples):
        measured.append(shape)
        return lambda: 1.0 if (shape.num_warps, shape.chunk) == (8, 0) else 2.0

    monkeypatch.setattr(row_tuning, "shape_timer", timer)
    device.measured = measured
    device.tmp_path = tmp_path
    return device


BIG = np.zeros((1024, 4096), np.float32)


def test_without_a_gpu_the_default(monkeypatch):
    monkeypatch.setattr(row_tuning.driver, "is_available", lambda: False)
    monkeypatch.setattr(row_tuning.TUNER, "choose", lambda *_: pytest.fail("tuned without a GPU"))
    p = region(softmax, BIG)
    assert row_tuning.row_shape(p) == default_row_shape(p)


def test_tune_zero_turns_it_off(gpu, monkeypatch):
    monkeypatch.setenv("TINYTON_TUNE", "0")
    p = region(softmax, BIG)
    assert row_tuning.row_shape(p) == default_row_shape(p) and not gpu.measured


def test_measured_once_then_read_from_the_disk_cache(gpu, capsys):
    p = region(softmax, np.zeros((4096, 4096), np.float32))
    assert row_tuning.row_shape(p) == RowShape(8)
    assert len(gpu.measured) == len(candidates(p)) > 1
    assert list((gpu.tmp_path / "tune-rows").glob("*.json"))
    assert "tinyton: tuned rows" in capsys.readouterr().err, "the first-use cost is printed"
    gpu.measured.clear()
    assert row_tuning.row_shape(region(softmax, np.zeros((3000, 3500), np.float32))) == RowShape(8)
    assert not gpu.measured, "a problem of the same class reads the stored choice"
    row_tuning.row_shape(region(rmsnorm, np.zeros((4096, 4096), np.float32), np.zeros(4096, np.float32)))
    assert gpu.measured, "the program is part of the key"
    gpu.measured.clear()
    row_tuning.row_shape(region(softmax, np.zeros((4096, 4096), np.float16)))
    assert gpu.measured, "the dtype is part of the key"
    gpu.measured.clear()
    gpu.name = "Pretend H200"
    row_tuning.row_shape(p)
    assert gpu.measured, "the GPU's name is part of the key"


@tt.jit
def scaled_softmax(x, s):
    e = tt.exp(x * s - tt.max(x * s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def test_small_mixed_and_scalar_problems_take_the_default(gpu):
    small = region(softmax, np.zeros((8, 1024), np.float32))
    mixed = region(rmsnorm, np.zeros((1024, 4096), np.float16), np.zeros(4096, np.float32))
    scalar = region(scaled_softmax, np.zeros((1024, 4096), np.float32), np.array(2.0, np.float32))
    assert not mixed.dtype and not scalar.dtype
    for p in (small, mixed, scalar):
        assert row_tuning.row_shape(p) == default_row_shape(p)
    assert not gpu.measured


def test_fingerprint_names_the_program_not_its_shape():
    a, b = region(softmax, BIG), region(softmax, np.zeros((10, 100), np.float32))
    c = region(rmsnorm, BIG, np.zeros(4096, np.float32))
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert a.shape_class() == (1024, 4096, 4)
    assert region(softmax, np.zeros((1000, 3100), np.float32)).shape_class() == (1024, 4096, 4)
    assert region(softmax, np.zeros((1000, 3000), np.float32)).shape_class() == (1024, 4096, 3)
    assert RowProblem(8192, 768, "float32").shape_class() != RowProblem(8192, 1024, "float32").shape_class()


def test_candidates_by_row_length():
    assert candidates(RowProblem(32, 2048, "float32")) == [RowShape(8), RowShape(4), RowShape(16)]
    long = candidates(RowProblem(1024, 32768, "float16"))
    assert long == [RowShape(16), RowShape(8), RowShape(16, per_sm=2), RowShape(16, 1, 8192)]
    assert not any(s.per_sm for s in candidates(RowProblem(1024, 32768, "float32"))), "32-bit rows would spill"
    assert {s.chunk for s in candidates(RowProblem(512, 65536, "float32"))} == {2048, 4096, 8192}
    short = candidates(RowProblem(65536, 128, "float32"))
    assert {s.rows for s in short} == {8, 16, 32} and all(32 * s.num_warps <= s.tile(128) for s in short)
    medium = candidates(RowProblem(8192, 768, "float16"))
    assert RowShape(4) == medium[0] and {RowShape(8, 2), RowShape(4, 2)} <= set(medium), "two rows a program"
    assert all(s.rows == 1 for s in candidates(RowProblem(300, 1024, "float32"))), "under MIN_PROGRAMS"
    assert all(s.rows == 1 for s in candidates(RowProblem(8192, 2048, "float32")))
    assert max(len(long), len(short), len(medium)) <= 10, "first use stays a few seconds"


def test_two_programs_per_sm_reach_ptxas():
    """The capped candidate of 32768-element rows: its kernel asks ptxas for two programs per SM (64
    registers at 512 threads), the others for no cap."""
    x = np.zeros((264, 32768), np.float16)
    problem = region(softmax, x)
    capped = RowShape(16, per_sm=2)
    assert capped in candidates(problem)
    for choice, want in ((capped, 2), (RowShape(16), None)):
        specs = fusion_to_kernels(fuse_module(softmax.compile(x).graph.clone(), fuse=True), choose_rows=lambda _, c=choice: c)
        attr = specs[0].module.attributes.get("tt.min_programs_per_sm")
        assert (attr.value.data if attr is not None else None) == want


@pytest.mark.parametrize("shape", [(70, 3000), (300, 100), (264, 40000)])
def test_every_candidate_agrees_with_numpy(shape):
    """The simulator runs each candidate's kernel as the GPU would: all of them are correct."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = np_softmax(x.astype(np.float64))
    problem = region(softmax, x)
    for choice in candidates(problem):
        module = fuse_module(softmax.compile(x).graph.clone(), fuse=True)
        specs = fusion_to_kernels(module, choose_rows=lambda _, c=choice: c)
        assert specs[0].num_warps == choice.num_warps and specs[0].tiles["ROWS"] == choice.rows
        (got,) = execute(module, specs, [x])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_the_chosen_shape_reaches_the_kernel(monkeypatch):
    monkeypatch.setattr(compiler_program, "row_shape", lambda p: RowShape(2, 4))
    x = np.random.default_rng(1).standard_normal((10, 200)).astype(np.float32)
    program = softmax.compile(x)
    assert program.steps[0].launch.num_warps == 2 and program.steps[0].launch.tiles == {"ROWS": 4, "BLOCK": 256}
    np.testing.assert_allclose(program(x), np_softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)



def test_sorts_and_scans_are_not_tuned():
    """A sort holds its row whole, a scan walks it in fixed chunks: their shape is fixed, so the tuner is never
    asked (it would time identical kernels: on a GPU, a long row's sort network compiled once per candidate)."""
    x = np.zeros((64, 4096), np.float32)
    for fn in (lambda a: np.sort(a * 2.0), lambda a: tt.cumsum(a * 2.0, axis=-1)):
        module = fuse_module(tt.jit(fn).compile(x).graph.clone(), fuse=True)
        asked = []
        specs = fusion_to_kernels(module, choose_rows=lambda p: asked.append(p) or default_row_shape(p))
        assert not asked and [s.kind for s in specs] == ["row_reduction"]

@pytest.mark.gpu
def test_row_shapes_are_measured_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(row_tuning.TUNER, "cache", KernelCache(tmp_path, disk=True))
    monkeypatch.delenv("TINYTON_TUNE", raising=False)
    p = region(softmax, np.zeros((1024, 8192), np.float16))
    assert row_tuning.row_shape(p) in candidates(p)
    assert list((tmp_path / "tune-rows").glob("*.json"))


@pytest.mark.gpu
def test_two_programs_per_sm_agree_with_numpy_on_the_gpu(monkeypatch):
    """The capped kernel (64 registers at 512 threads) computes what the uncapped one does."""
    monkeypatch.setattr(compiler_program, "row_shape", lambda p: RowShape(16, per_sm=2))
    x = np.random.default_rng(2).standard_normal((264, 32768)).astype(np.float16)
    got = softmax.compile(x)(x)
    np.testing.assert_allclose(got.astype(np.float64), np_softmax(x.astype(np.float64)), rtol=5e-3, atol=2e-6)
