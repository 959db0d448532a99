"""NumPy's joining, splitting and reshaping functions in array programs against NumPy (hypothesis):
concatenate, stack, split / array_split, flip, squeeze, expand_dims, moveaxis, ravel / flatten, repeat,
tile, pad, where with scalars; of inputs and of computed values, on the simulator and the GPU (`-m gpu`).
A slice, flip, pad or concatenation of a computed value fuses with its producer and consumers (RoPE is
one kernel). Shape mismatches are CompilationErrors at the user's line naming shapes and the fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.frontend.reference import evaluate
from tinyton.frontend.tracing import trace
from tinyton.lowering.ptx import assemble_ptx
from tinyton.rewrites.pipeline import fuse_module

sys.path.insert(0, str(Path(__file__).parent))
from fusion_helpers import compile_program, execute, run_program  # noqa: E402
from test_numpy_indexing import (  # noqa: E402
    BACKENDS,
    DTYPES,
    SIZES,
    arrays,
    computed,
    examples,
    same,
    values,
)

EXAMPLES = examples(30)


def run(monkeypatch, backend: str, fn, *args):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    return tt.jit(fn)(*args)


def both(monkeypatch, backend: str, fn, x, *rest) -> None:
    """`fn` of an input and of a computed value, against NumPy."""
    got = run(monkeypatch, backend, lambda x, *r: (fn(x, *r), fn(computed(x), *r)), x, *rest)
    same(got[0], fn(x, *rest))
    same(got[1], fn(computed(x), *rest))


axes_of = lambda ndim: st.integers(-ndim, ndim - 1)  # noqa: E731


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_concatenate_and_stack(monkeypatch, backend, data) -> None:
    ndim = data.draw(st.integers(1, 3))
    axis = data.draw(st.one_of(axes_of(ndim), st.none()))
    shape = [data.draw(st.sampled_from(SIZES)) for _ in range(ndim)]
    dtype = data.draw(st.sampled_from(DTYPES))
    parts = []
    for i in range(data.draw(st.integers(1, 3))):
        if axis is not None:
            shape[axis] = data.draw(st.sampled_from(SIZES))
        parts.append(values(tuple(shape), dtype, i))
    got = run(monkeypatch, backend, lambda *p: tt.concatenate([computed(v) if i % 2 else v for i, v in enumerate(p)],
                                                              axis=axis), *parts)
    same(got, np.concatenate([computed(v) if i % 2 else v for i, v in enumerate(parts)], axis=axis))
    if axis is not None:
        stacked = [values(parts[0].shape, dtype, i) for i in range(len(parts))]
        at = data.draw(axes_of(ndim + 1))
        same(run(monkeypatch, backend, lambda *p: tt.stack([computed(v) for v in p], at), *stacked),
             np.stack([computed(v) for v in stacked], at))


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_split_and_array_split(monkeypatch, backend, data) -> None:
    x = data.draw(arrays())
    axis = data.draw(axes_of(x.ndim))
    n = x.shape[axis]
    if data.draw(st.booleans()):
        sections = data.draw(st.lists(st.integers(-n - 2, n + 2), max_size=4))
        split = data.draw(st.sampled_from([np.split, np.array_split]))
    else:
        sections = data.draw(st.integers(1, 4))
        split = np.array_split if n % sections else data.draw(st.sampled_from([np.split, np.array_split]))
    want = split(computed(x), sections, axis)
    builtin = tt.split if split is np.split else tt.array_split
    got = run(monkeypatch, backend, lambda x: tuple(builtin(computed(x), sections, axis)), x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_reordering_and_reshaping(monkeypatch, backend, data) -> None:
    x = data.draw(arrays())
    flip_axis = data.draw(st.one_of(st.none(), axes_of(x.ndim), st.sets(st.integers(0, x.ndim - 1), min_size=1).map(tuple)))
    both(monkeypatch, backend, lambda x: np.flip(x, flip_axis), x)
    new = data.draw(st.sets(st.integers(-x.ndim - 1, x.ndim), min_size=1, max_size=2).map(tuple).filter(
        lambda a: len({v % (x.ndim + len(a)) for v in a}) == len(a)))
    both(monkeypatch, backend, lambda x: np.expand_dims(x, new), x)
    ones = tuple(d for d, n in enumerate(x.shape) if n == 1)
    squeeze_axis = data.draw(st.one_of(st.none(), st.sampled_from(ones or (None,))))
    both(monkeypatch, backend, lambda x: np.squeeze(x, squeeze_axis), x)
    source, destination = data.draw(axes_of(x.ndim)), data.draw(axes_of(x.ndim))
    both(monkeypatch, backend, lambda x: np.moveaxis(x, source, destination), x)
    both(monkeypatch, backend, lambda x: x.ravel(), x)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_repeat_and_tile(monkeypatch, backend, data) -> None:
    x = data.draw(arrays(max_rank=2))
    axis = data.draw(st.one_of(st.none(), axes_of(x.ndim)))
    n = x.size if axis is None else x.shape[axis]
    repeats = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    both(monkeypatch, backend, lambda x: np.repeat(x, repeats, axis), x)
    reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)))
    both(monkeypatch, backend, lambda x: np.tile(x, reps), x)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_pad(monkeypatch, backend, data) -> None:
    x = data.draw(arrays())
    width = st.integers(0, 3)
    pad_width = data.draw(st.one_of(width, st.tuples(width, width),
                                    st.tuples(*[st.tuples(width, width) for _ in range(x.ndim)])))
    value = st.integers(-3, 3) if x.dtype != np.bool_ else st.booleans()
    constant = data.draw(st.one_of(value, st.tuples(value, value),
                                   st.tuples(*[st.tuples(value, value) for _ in range(x.ndim)])))
    both(monkeypatch, backend, lambda x: np.pad(x, pad_width, constant_values=constant), x)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_where_with_scalars(monkeypatch, backend, data) -> None:
    x = data.draw(arrays(max_rank=2).filter(lambda a: a.dtype != np.bool_))
    a, b = data.draw(st.sampled_from([(2, "x"), ("x", -1), (1.5, 0)]))

    def program(x):
        pick = lambda v: x if v == "x" else v  # noqa: E731
        return np.where(x > 0, pick(a), pick(b))

    want = program(x)  # two Python scalars: NumPy's float64, float32 in array programs (docs/fusion.md)
    got = run(monkeypatch, backend, program, x)
    same(got, want.astype(got.dtype) if want.dtype == np.float64 else want)


def rope(x, sin, cos):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return tt.concatenate([-x2, x1], axis=-1) * sin + x * cos


def rope_of_product(a, w, sin, cos):
    return rope(a * w, sin, cos)


def np_rope(x, sin, cos):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin + x * cos


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (1, 4, 33, 64), (2, 2, 7, 6)])
def test_rope_is_one_kernel(monkeypatch, backend, shape) -> None:
    """`x` an input and `x` computed in the program: one launch each, `sin`/`cos` broadcast over heads."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    rng = np.random.default_rng(0)
    x, a = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(shape[-1]).astype(np.float32)
    sin, cos = (rng.standard_normal(shape[-2:]).astype(np.float32) for _ in range(2))
    for fn, args, want in ((rope, (x, sin, cos), np_rope(x, sin, cos)),
                           (rope_of_product, (a, w, sin, cos), np_rope(a * w, sin, cos))):
        program = tt.jit(fn)
        assert program.compile(*args).num_launches == 1
        np.testing.assert_allclose(program(*args), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slices_pads_and_flips_of_computed_values_fuse(monkeypatch, backend) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    x = values((6, 10), np.float32)

    def program(x):
        y = tt.exp(x * 0.01)
        return tt.pad(y[1:, ::-2], ((1, 0), (2, 1)), constant_values=3.0) + tt.flip(y[:, :8], 0)[:, None, :].sum(1)

    compiled = tt.jit(program)
    assert compiled.compile(x).num_launches == 1
    y = np.exp(x * np.float32(0.01))
    np.testing.assert_allclose(compiled(x), np.pad(y[1:, ::-2], ((1, 0), (2, 1)), constant_values=3.0)
                               + np.flip(y[:, :8], 0), rtol=1e-6)


def test_a_window_of_a_chain_reading_each_value_twice_compiles_at_once() -> None:
    """`x = x * 0.5 + x` twenty times, then a window: each step reads the step before twice, and the window pushed up
    the chain is one slice a step (it was two slices of each step's input, so 2**20 at the top: minutes at 14 steps,
    hours at 20); one kernel, NumPy's values."""
    x = values((8, 8), np.float32)

    def program(x):
        for _ in range(20):
            x = x * np.float32(0.5) + x
        return x[1:, 2:]

    compiled = tt.jit(program).compile(x)
    assert compiled.num_launches == 1 and str(compiled.fused).count("tta.") < 1000  # 2**20 slices without
    np.testing.assert_allclose(compiled(x), program(x), rtol=1e-6)


def test_checks_of_a_window_of_computed_indices_share_one_kernel() -> None:
    """`one_hot`'s checks of top-k indices (`(i < 0).any()`, `(i >= n).any()`: reductions of the window of an argsort
    flattened) read the argsort's output in place, all in one kernel (4 launches when each check read a copy of the
    window: a kernel stored one per check, then one kernel per check)."""
    x = values((8, 4), np.float32)

    def program(x):
        top = x.argsort(axis=1)[:, :2]
        return (top < 0).any(), (top >= 4).any(), (top == 3).any(), top + 1

    compiled = tt.jit(program)
    assert compiled.compile(x).num_launches == 3
    for got, want in zip(compiled(x), program(x)):  # NumPy runs the program as it is
        np.testing.assert_array_equal(got, want)


def test_a_window_that_two_kernels_read_is_stored_once() -> None:
    """A window of an input read as the left operand of two products of different widths (which read it whole, a
    kernel of their own each) is copied by one kernel that stores it once (once per product when each product's copy of
    the view was a result of its own)."""
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(shape).astype(np.float32) for shape in ((8, 5), (4, 6), (4, 3)))

    def program(x, w1, w2):
        window = x[:, 1:]
        return window @ w1, window @ w2

    module, specs = compile_program(program, [x, w1, w2], fuse=True)
    assert [len(spec.outputs) for spec in specs] == [1, 1, 1]
    for got, want in zip(execute(module, specs, [x, w1, w2]), program(x, w1, w2)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_shape_errors_name_the_op_shapes_and_fix() -> None:
    x, y = values((2, 3), np.float32), values((2, 4), np.float32)
    cases = [
        (lambda x, y: tt.concatenate([x, y], axis=0), (
            r"concatenate: all the input array dimensions except for the concatenation axis must match exactly, but "
            r"along dimension 1, the array at index 0 has size 3 and the array at index 1 has size 4 \(shapes "
            r"\(2, 3\), \(2, 4\), axis 0\); .*reshape")),
        (lambda x, y: tt.stack([x, y]), r"stack: all input arrays must have the same shape, got \(2, 3\), \(2, 4\)"),
        (lambda x, y: tt.concatenate([x[0, 0], y[0, 0]]), r"zero-dimensional arrays cannot be concatenated"),
        (lambda x, y: tt.split(x, 2, axis=1), r"array split does not result in an equal division"),
        (lambda x, y: tt.squeeze(x, 0), r"cannot select an axis to squeeze out which has size not equal to one"),
        (lambda x, y: tt.pad(x, 1, mode="reflect"), r"mode 'reflect' is not supported"),
        (lambda x, y: tt.repeat(x, [1, 2]), r"could not be broadcast together with shape \(6,\) \(2,\)"),
        (lambda x, y: tt.flip(x, 2), r"axis 2 is out of bounds for array of dimension 2"),
    ]
    for fn, message in cases:
        with pytest.raises(tt.CompilationError, match=message) as info:
            tt.jit(fn)(x, y)
        assert "test_numpy_shapes.py" in str(info.value)


def test_unfused_programs_agree(monkeypatch) -> None:
    """With fusion off (`TINYTON_FUSION=0`) a concatenation is a select between padded windows of its parts."""
    monkeypatch.setenv("TINYTON_FUSION", "0")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    sin, cos = (rng.standard_normal((5, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(tt.jit(rope)(x, sin, cos), np_rope(x, sin, cos), rtol=1e-6)


CHAINS = {  # program, kernels when fused
    "pad of a pad": (lambda x: np.pad(np.pad(x * 2, 1, constant_values=2), 1, constant_values=3) * 2, 1),
    "padded, transposed, flipped": (lambda x: np.pad(x, ((1, 0), (0, 2)), constant_values=2).T[::-1, ::-2] * 2, 1),
    "concatenation of computed parts": (lambda x: np.concatenate([x * 2, (x * x)[:, :2], -x], 1) + 1, 1),
    "rotation along axis 0": (lambda x: np.concatenate([x[1:], x[:1] * 3]) - x, 1),
    "slice of a transpose": (lambda x: (x.T * 2)[1:4, ::-1], 1),
    "slice of a broadcast": (lambda x: np.broadcast_to(x[:, :1] * 2, (5, 6))[::2, 1:], 1),
    "reduction of a slice": (lambda x: (x * 2)[1:, 2:].sum(axis=1), 1),
    "bool pad": (lambda x: np.pad(x > 3, 1, constant_values=True), 1),
    "slice of a reduction": (lambda x: x.sum(axis=1)[1:3] * 2, 2),
    "matmul of slices": (lambda x: x[:, :4] @ x[:4, 1:], 1),  # windows of inputs, read in place
    # rows of a window flattened (a reshape NumPy copies) are read in place too: 2 kernels when a copy was stored
    "full reduction of a window": (lambda x: (x * 2)[1:, 2:].sum(), 1),
    "full reduction of a transposed window": (lambda x: x.T[::2].max(), 1),
    "flattened transpose": (lambda x: x.T.reshape(-1) * 2, 1),
}


@pytest.mark.parametrize("name", CHAINS)
def test_remapped_chains_fuse(name) -> None:
    """Fused and unfused (one kernel per op) agree with NumPy; the fused program takes the kernels listed."""
    fn, kernels = CHAINS[name]
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    for fuse in (True, False):
        (got,), launches = run_program(fn, [x], fuse)
        np.testing.assert_allclose(got, fn(x), rtol=1e-6)
        assert not fuse or launches == kernels


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA toolkit) is not installed")
def test_kernels_assemble_for_sm_90() -> None:
    """Masked loads at offsets with fills, negative strides and bounds-checked gathers lower to PTX that
    ptxas accepts (what the GPU tests then run)."""
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    r, sc = np.zeros((2, 4, 33, 64), np.float32), np.zeros((33, 64), np.float32)
    programs = [(fn, [x]) for fn, _ in CHAINS.values()] + [
        (rope, [r, sc, sc]),
        (rope_of_product, [r, np.zeros(64, np.float32), sc, sc]),
        (lambda t, i: t[i, ::-1], [x, np.array([1, 2], np.int32)]),
        (lambda x: np.flip(np.pad(x.astype(np.float16), 2), 1), [x]),
    ]
    for fn, args in programs:
        _, specs = compile_program(fn, args, fuse=True)
        for spec in specs:
            kernel = compile_module(spec.module.clone(), num_warps=spec.num_warps, arch="sm_90", toolchain="llvmlite")
            assert assemble_ptx(kernel.asm["ptx"], "sm_90")


@pytest.mark.parametrize("name", CHAINS)
def test_reference_interpreter(name) -> None:
    """The NumPy reference of tta (frontend/reference.py) runs slices and concatenations, before and after fusion."""
    fn, _ = CHAINS[name]
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    module = trace(fn, [x])
    np.testing.assert_allclose(evaluate(module, x)[0], fn(x), rtol=1e-6)
    np.testing.assert_allclose(evaluate(fuse_module(module), x)[0], fn(x), rtol=1e-6)
