"""Split rows in two kernels (few long rows, one program per slice, partials combined by the next kernel) on
the simulator: every reduction kind the fusion codegen emits, lengths that are multiples of nothing. The
one-kernel form with grid barriers, which these shapes take when the GPU can hold them, is turned off here
(`two_kernels`); tests/test_grid_split.py runs the same cases through it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fusion_helpers import compile_program, run_program
from test_fusion import layernorm, np_softmax, rel, softmax

import tinyton as tt
from tinyton.frontend import array_ops as ops
from tinyton.frontend import programs
from tinyton.lowering.fusion import geometry, grid

rng = np.random.default_rng(7)
K = 9001
"""Past SPLIT_MIN_ROW: 5 slices of 2048, the last one partly masked, 5 partials (a masked combine)."""


@pytest.fixture(autouse=True)
def two_kernels(monkeypatch) -> Iterator[None]:
    """No grid fits no program: every split region takes the two-kernel form (programs compiled anew)."""
    monkeypatch.setattr(grid, "GRID_PROGRAMS_PER_SM", 0)
    programs._PROGRAMS.clear()
    yield
    programs._PROGRAMS.clear()


def log_softmax(x):
    s = x - x.max(axis=-1, keepdims=True)
    return s - ops.log(ops.exp(s).sum(axis=-1, keepdims=True))


def np_layernorm(x, w, b):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b


CASES = {
    "sum": (lambda x: x.sum(axis=-1), lambda x: x.astype(np.float64).sum(-1)),
    "max": (lambda x: x.max(axis=-1), lambda x: x.max(-1)),
    "min": (lambda x: x.min(axis=-1, keepdims=True), lambda x: x.min(-1, keepdims=True)),
    "mean": (lambda x: x - x.mean(axis=-1, keepdims=True), lambda x: x - x.astype(np.float64).mean(-1, keepdims=True)),
    "online softmax": (softmax, np_softmax),
    "log-softmax": (log_softmax, lambda x: (s := x - x.max(-1, keepdims=True)) - np.log(np.exp(s).sum(-1, keepdims=True))),
    "two-pass variance": (lambda x: ((x - x.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1), lambda x: x.var(-1)),
}


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("rows", [1, 3])
def test_split_kinds(kind: str, rows: int) -> None:
    fn, ref = CASES[kind]
    x = rng.standard_normal((rows, K)).astype(np.float32)
    (y,), launches = run_program(fn, [x], fuse=True)
    assert launches >= 2, "a split needs a kernel after the partials"
    assert rel(y, ref(x)) <= 1e-5


@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_split_layernorm_two_kernels(offset: float) -> None:
    """The mean and the variance around it share a walk (per slice: count, mean, M2, merged with Chan's
    formula), then the output: two kernels, exact to f32 even where the mean dwarfs the spread."""
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, K), (K,), (K,)))
    x += np.float32(offset)
    (y,), launches = run_program(layernorm, [x, w, b], fuse=True)
    assert launches == 2 and rel(y, np_layernorm(x.astype(np.float64), w, b)) <= 1e-4


@pytest.mark.parametrize("op", ["count", "max", "min"])
def test_split_integers(op: str) -> None:
    x = rng.integers(-1000, 1000, (2, K), dtype=np.int32)
    fn = (lambda x: (x > 0).sum(axis=-1)) if op == "count" else (lambda x: getattr(x, op)(axis=-1))
    (y,), _ = run_program(fn, [x], fuse=True)
    np.testing.assert_array_equal(y, fn(x))


def test_split_softmax_infinities() -> None:
    """A row of -inf is NaN as in NumPy; -inf slices (max -inf, sum 0) and a +inf element combine exactly."""
    x = rng.standard_normal((3, K)).astype(np.float32)
    x[0] = -np.inf
    x[1, :5000] = -np.inf
    x[2, 77] = np.inf
    (y,), _ = run_program(softmax, [x], fuse=True)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-7)


def test_split_slices_walked_in_chunks(monkeypatch) -> None:
    """A slice longer than a chunk is walked in a loop (here 4 slices of 8192, chunks of 4096)."""
    monkeypatch.setattr(geometry, "SPLIT_PROGRAMS", 8)
    x = rng.standard_normal((2, 30001)).astype(np.float32)
    _, specs = compile_program(softmax, [x], fuse=True)
    assert [s.tiles for s in specs] == [{"SPLIT": 4, "SLICE": 8192, "BLOCK": 4096}] * 2
    (y,), _ = run_program(softmax, [x], fuse=True)
    assert rel(y, np_softmax(x)) <= 1e-5


def test_split_geometry_16x262144() -> None:
    """The issue's shape: 64 slices of 4096 per row, 1024 programs, the (max, sum) partials in one f32
    scratch buffer (a block of 1024 each)."""
    x = np.zeros((16, 262144), np.float32)
    _, specs = compile_program(softmax, [x], fuse=True)
    assert [(s.grid, s.num_warps, s.tiles["SLICE"]) for s in specs] == [((1024, 1, 1), 8, 4096)] * 2
    assert specs[0].scratch == specs[1].scratch and [s.shape for s in specs[0].scratch] == [(2048,)]
    assert [p.role for p in specs[1].params] == ["input", "output", "scratch"]


def test_split_scratch_by_element_type() -> None:
    """Partials of an int reduction and of float ones: one scratch buffer per element type."""
    x = rng.integers(-9, 9, (2, K), dtype=np.int32)
    fn = lambda x: (x.max(axis=-1), x.astype(np.float32).sum(axis=-1), x.astype(np.float32).min(axis=-1))
    _, specs = compile_program(fn, [x], fuse=True)
    assert [(s.shape, str(s.element)) for s in specs[0].scratch] == [((10,), "i32"), ((20,), "f32")]
    got, _ = run_program(fn, [x], fuse=True)
    for g, w in zip(got, fn(x)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape, split", [((264, 16384), False), ((128, 16384), False), ((63, 16384), True),
                                          ((128, 65536), True), ((264, 65536), False), ((16, 4096), False)])
def test_which_rows_are_split(shape, split: bool) -> None:
    """Few rows (< 64), or rows too long for registers that do not fill the GPU (< 264)."""
    _, specs = compile_program(softmax, [np.zeros(shape, np.float32)], fuse=True)
    assert (len(specs), bool(specs[0].scratch)) == ((2, True) if split else (1, False))


def test_split_array_program_on_simulator(monkeypatch) -> None:
    """Through `@tt.jit` (the program's buffer plan allocates the scratch buffers)."""
    monkeypatch.setenv("TINYTON_BACKEND", "sim")

    @tt.jit
    def program(x):
        return softmax(x * 2.0)

    x = rng.standard_normal((2, K)).astype(np.float32)
    assert program.compile(x).num_launches == 2
    assert rel(program(x), np_softmax(x * np.float32(2.0))) <= 1e-5


def _on_backend(monkeypatch, backend: str, kind: str, dtype) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    fn, ref = CASES[kind]
    x = (rng.standard_normal((5, 70001)) * 2).astype(dtype)
    program = tt.jit(fn)
    assert program.compile(x).num_launches == 2
    want = ref(x.astype(np.float64))
    assert rel(program(x), want) <= (1e-5 if dtype == np.float32 else 5e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_split_kinds_through_jit(monkeypatch, dtype) -> None:
    """The GPU test's programs on the simulator: 35 slices of 2048 per row (the last one partly masked)."""
    for kind in ("online softmax", "two-pass variance"):
        _on_backend(monkeypatch, "sim", kind, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("kind", CASES)
def test_split_kinds_on_gpu(monkeypatch, kind: str, dtype) -> None:
    _on_backend(monkeypatch, "cuda", kind, dtype)


@pytest.mark.gpu
def test_split_16x262144_on_gpu(monkeypatch) -> None:
    """The issue's shape: softmax and layer norm (two kernels each) against float64."""
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 262144), (262144,), (262144,)))
    assert rel(tt.jit(softmax)(x), np_softmax(x.astype(np.float64))) <= 1e-5
    assert rel(tt.jit(layernorm)(x, w, b), np_layernorm(x.astype(np.float64), w, b)) <= 1e-5
