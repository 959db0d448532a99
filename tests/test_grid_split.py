"""Split rows in one kernel with grid barriers (`lowering/fusion/grid.py`) on the simulator, which runs the
whole grid as one batch: every reduction kind of tests/test_split_rows.py, lengths that are multiples of
nothing, NaN and inf rows, the two-kernel fallback kept beside it; on the GPU against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import compile_program, execute, run_program
from standin_gpu import standin_gpu
from test_fusion import layernorm, np_softmax, rel, softmax
from test_split_rows import CASES, np_layernorm

import tinyton as tt
from tinyton.compiler.kernel import CompiledKernel
from tinyton.dialects import tt as tt_dialect
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels, grid
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime.simulator import SimulatorError, run

rng = np.random.default_rng(11)
K = 9001
"""5 slices of 2048 per row, the last one partly masked (a masked combine of 5 partials)."""


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("rows", [1, 3])
def test_grid_kinds(kind: str, rows: int) -> None:
    """One launch, and the same results as its two-kernel fallback and NumPy."""
    fn, ref = CASES[kind]
    x = rng.standard_normal((rows, K)).astype(np.float32)
    module, specs = compile_program(fn, [x], fuse=True)
    assert len(specs) == 1 and specs[0].tiles["GRID_BARRIER"] == 1 and len(specs[0].fallback) == 2
    (y,) = execute(module, specs, [x])
    (z,) = execute(module, specs[0].fallback, [x])
    assert rel(y, ref(x)) <= 1e-5
    np.testing.assert_array_equal(y, z)


@pytest.mark.parametrize("most, rows, per", [(1, 4, 1), (2, 4, 2), (4, 4, 4), (4, 6, 3), (2, 5, 1)])
def test_grid_rows_per_program(monkeypatch, most: int, rows: int, per: int) -> None:
    """A program takes the same slice of `per` rows in turn (a divisor of the rows, at most GRID_ROWS): the
    same results as the two-kernel fallback, for every reduction kind, with a -inf row and a NaN."""
    monkeypatch.setattr(grid, "GRID_ROWS", most)
    x = rng.standard_normal((rows, K)).astype(np.float32)
    x[1] = -np.inf
    x[rows - 1, 4321] = np.nan
    for kind, (fn, _) in CASES.items():
        module, specs = compile_program(fn, [x], fuse=True)
        assert len(specs) == 1 and specs[0].tiles["ROWS"] == per, kind
        assert specs[0].grid[0] == rows // per * 5
        with np.errstate(invalid="ignore"):
            for y, z in zip(execute(module, specs, [x]), execute(module, specs[0].fallback, [x])):
                np.testing.assert_array_equal(y, z)


@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_grid_layernorm(offset: float) -> None:
    """Mean and variance partials (count, mean, M2) merged with Chan's formula after the barrier."""
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, K), (K,), (K,)))
    x += np.float32(offset)
    (y,), launches = run_program(layernorm, [x, w, b], fuse=True)
    assert launches == 1 and rel(y, np_layernorm(x.astype(np.float64), w, b)) <= 1e-4


def test_grid_two_levels() -> None:
    """Reductions of two dependency levels (a max, then a sum of what the max scaled, not an online pair):
    two barriers per row in one kernel (each program takes the same slice of both rows)."""
    fn = lambda x: (x / x.max(axis=-1, keepdims=True)).sum(axis=-1)
    x = (rng.random((2, K)) + 0.5).astype(np.float32)
    module, specs = compile_program(fn, [x], fuse=True)
    barriers = [op for op in specs[0].kernel.walk() if isinstance(op, tt_dialect.GridBarrierOp)]
    assert len(specs) == 1 and specs[0].tiles["ROWS"] == 2 and len(barriers) == 4
    (y,) = execute(module, specs, [x])
    assert rel(y, (x / x.max(-1, keepdims=True)).astype(np.float64).sum(-1)) <= 1e-5


def test_grid_one_counter(monkeypatch) -> None:
    """The grid-wide variant: one counter, program 0 leads, every program waits for all."""
    monkeypatch.setattr(grid, "BARRIER_PER_ROW", False)
    x = rng.standard_normal((3, K)).astype(np.float32)
    module, specs = compile_program(softmax, [x], fuse=True)
    assert specs[0].scratch[-1].shape == (1,)
    (y,) = execute(module, specs, [x])
    assert rel(y, np_softmax(x)) <= 1e-5


def test_grid_softmax_nan_and_infinities() -> None:
    """A row of -inf is NaN as in NumPy, -inf slices (max -inf, sum 0) combine exactly, a +inf element makes
    its row NaN, a NaN element its row NaN."""
    x = rng.standard_normal((4, K)).astype(np.float32)
    x[0] = -np.inf
    x[1, :5000] = -np.inf
    x[2, 77] = np.inf
    x[3, 8999] = np.nan
    (y,), launches = run_program(softmax, [x], fuse=True)
    assert launches == 1
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-7)


def test_grid_integers() -> None:
    x = rng.integers(-1000, 1000, (2, K), dtype=np.int32)
    fn = lambda x: ((x > 0).sum(axis=-1), x.max(axis=-1), x.min(axis=-1))
    got, launches = run_program(fn, [x], fuse=True)
    assert launches == 1
    for g, w in zip(got, fn(x)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("sm_count, slice_, programs", [(132, 4096, 512), (264, 2048, 1024), (100, None, None)])
def test_grid_geometry_16x262144(sm_count: int, slice_, programs) -> None:
    """The issue's shape: each program takes one slice of 4096 of two rows (512 programs, 4 per SM on 132
    SMs); a GPU of twice the SMs takes slices of 2048; one too small for 16 x 262144 elements in registers
    keeps the two kernels."""
    x = np.zeros((16, 262144), np.float32)
    module = trace(softmax, [x])
    fuse_module(module, True)
    specs = fusion_to_kernels(module, sm_count=sm_count)
    if slice_ is None:
        assert len(specs) == 2 and not specs[0].fallback
        return
    (spec,) = specs
    assert (spec.grid, spec.num_warps, spec.tiles["SLICE"], spec.tiles["ROWS"]) == ((programs, 1, 1), 8, slice_, 2)
    # (max, sum) per row and slice: the fallback's buffer (1024 programs) where it is large enough; one
    # counter line per row
    partials = 2 * 16 * (262144 // slice_)
    assert [s.shape for s in spec.scratch] == [(max(partials, 2048),), (512,)] and spec.scratch[-1].counter
    assert (spec.scratch[0] is spec.fallback[0].scratch[0]) == (partials <= 2048)
    assert [p.role for p in spec.params] == ["input", "output", "scratch", "scratch"]


def test_grid_through_jit(monkeypatch) -> None:
    """Through `@tt.jit`: one launch, the counter kept by the program, calls repeated."""
    monkeypatch.setenv("TINYTON_BACKEND", "sim")

    @tt.jit
    def program(x):
        return softmax(x * 2.0)

    x = rng.standard_normal((2, K)).astype(np.float32)
    compiled = program.compile(x)
    assert compiled.num_launches == 1 and compiled.counters == ((64,),)
    for _ in range(2):
        assert rel(program(x), np_softmax(x * np.float32(2.0))) <= 1e-5


def test_grid_with_a_reshaped_view(monkeypatch) -> None:
    """A whole-array mean (a reshape of a row value, kept as a view) beside split rows: the prefetch of the
    rows' inputs leaves views to the ops that load them (fuzz seed 20261123, cases 906 and 1277)."""
    monkeypatch.setenv("TINYTON_BACKEND", "sim")

    @tt.jit
    def program(x):
        e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
        return e / tt.sum(e, axis=-1, keepdims=True), e.mean(axis=None, keepdims=True)

    x = rng.standard_normal((2, 70000)).astype(np.float32)
    probabilities, mean = program(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    assert rel(probabilities, np_softmax(x)) <= 1e-5
    assert rel(mean, e.mean(keepdims=True)) <= 1e-5


def test_simulator_grid_barrier_needs_one_batch() -> None:
    """A grid barrier cannot run one program at a time; each row's counter has bit 31 flipped per barrier."""
    x = rng.standard_normal((2, K)).astype(np.float32)
    _, specs = compile_program(softmax, [x], fuse=True)
    (spec,) = specs
    args = [x.reshape(-1).copy(), np.empty(x.size, np.float32), np.empty(spec.scratch[0].shape, np.float32),
            np.zeros(64, np.int32)]
    run(spec.module, spec.grid, args)
    assert args[3][[0, 32]].tolist() == [-(2**31)] * 2 and not args[3][[1, 31, 33]].any()  # a counter per row
    run(spec.module, spec.grid, args)
    assert not args[3].any()
    with pytest.raises(SimulatorError, match="all its programs at once"):
        run(spec.module, spec.grid, args, batched=False)


def _on_backend(monkeypatch, backend: str, kind: str, dtype, shape=(5, 70001)) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    fn, ref = CASES[kind]
    x = (rng.standard_normal(shape) * 2).astype(dtype)
    program = tt.jit(fn)
    assert program.compile(x).num_launches == 1
    want = ref(x.astype(np.float64))
    for _ in range(3):  # the barrier's counter is reused from call to call
        assert rel(program(x), want) <= (1e-5 if dtype == np.float32 else 5e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_grid_kinds_through_jit(monkeypatch, dtype) -> None:
    for kind in ("online softmax", "two-pass variance"):
        _on_backend(monkeypatch, "sim", kind, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [5, 6])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("kind", CASES)
def test_grid_kinds_on_gpu(monkeypatch, kind: str, dtype, rows: int) -> None:
    """5 rows: one row per program; 6 rows: two (each program takes the same slice of two rows in turn)."""
    _on_backend(monkeypatch, "cuda", kind, dtype, (rows, 70001))


@pytest.mark.gpu
def test_grid_16x262144_on_gpu(monkeypatch) -> None:
    """The issue's shape in one cooperative launch (the GPU holds its 512 programs), against float64, with a
    -inf row and a NaN; layer norm; three calls reuse the counters."""
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 262144), (262144,), (262144,)))
    x[3] = -np.inf
    x[5, 1000] = np.nan
    sm = tt.jit(softmax)
    program = sm.compile(x)
    assert program.num_launches == 1 and program.kernels()[0].resident_programs() >= 512
    with np.errstate(invalid="ignore"):
        want = np_softmax(x.astype(np.float64))
        for _ in range(3):
            np.testing.assert_allclose(sm(x), want, rtol=1e-5, atol=1e-7)
    rows = x[[0, 1, 2, 4]]
    assert rel(tt.jit(layernorm)(rows, w, b), np_layernorm(rows.astype(np.float64), w, b)) <= 1e-5


@pytest.mark.gpu
def test_grid_fallback_on_gpu(monkeypatch) -> None:
    """Where the GPU cannot hold the grid (here: says it holds one program), the two-kernel form runs."""
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    asked = []
    monkeypatch.setattr(CompiledKernel, "resident_programs", lambda self: asked.append(self.name) or 1)
    x = rng.standard_normal((16, 65536)).astype(np.float32)
    assert rel(tt.jit(softmax)(x), np_softmax(x.astype(np.float64))) <= 1e-5
    assert len(asked) == 1


@tt.jit
def split_softmax(x):
    return softmax(x)


@pytest.mark.parametrize("resident", [1 << 20, 1])
def test_generated_call_path_counters_and_fallback(monkeypatch, resident: int) -> None:
    """On the stand-in GPU: the counters are made once per stream (zeroed, after the other buffers) and
    passed on every call; a GPU that holds fewer programs than the grid gets the two-kernel fallback."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(CompiledKernel, "resident_programs", lambda self: resident)
    x = torch.randn(3, K)
    with standin_gpu(split_softmax, record=True) as launches:
        split_softmax(x)
        split_softmax(x)
        source = split_softmax.compile(x).runner((x,)).source
    if resident > 1:
        (name, grid, values), (_, _, again) = launches
        assert grid == (15, 1, 1) and values[-1] == again[-1] and "cs = COUNTERS(s)" in source
    else:
        assert [grid for _, grid, _ in launches] == [(15, 1, 1)] * 4  # the chain's two kernels, twice
        assert all(len(values) == 3 for _, _, values in launches)  # x, out, partials: no counter
