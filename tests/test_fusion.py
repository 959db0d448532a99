"""Fusion end to end on the simulator: launch counts, fused == unfused == NumPy, the planner's
refusals, the codegen strategies and their heuristics."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import compile_program, run_program
from xdsl.dialects import scf

from tinyton.analysis.domain import NotFusable, analyze
from tinyton.dialects import tt, tta
from tinyton.frontend import array_ops as ops
from tinyton.lowering.fusion import geometry
from tinyton.rewrites.fuse import Planner
from tinyton.rewrites.group_graph import CycleError
from tinyton.runtime.simulator import run

rng = np.random.default_rng(0)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def softmax(x):
    e = ops.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rmsnorm(x, w):
    return x * ops.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_rmsnorm(x, w):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(1e-30, float(np.max(np.abs(b)))))


def kinds(module) -> list[str]:
    return [op.kind.data for op in module.walk() if isinstance(op, tta.FusionOp)]


# ---- softmax and rmsnorm: one kernel, any row length -----------------------------------------------


@pytest.mark.parametrize("cols", [1, 7, 1000, 4096, 65536])
def test_softmax_and_rmsnorm(cols: int) -> None:
    rows = 3 if cols < 65536 else 2
    x, w = randn(rows, cols), randn(cols)
    for fn, args, ref, unfused_launches, kind in (
        (softmax, [x], np_softmax(x), 5, "softmax"),
        (rmsnorm, [x, w], np_rmsnorm(x, w), 6, "rmsnorm"),
    ):
        (fused,), n_fused = run_program(fn, args, fuse=True)
        (unfused,), n_unfused = run_program(fn, args, fuse=False)
        assert (n_fused, n_unfused) == (1, unfused_launches)  # two rows of 65536 are split: test_grid_split
        assert rel(fused, unfused) <= 1e-6
        assert rel(fused, ref) <= 1e-5
        module, _ = compile_program(fn, args, fuse=True)
        assert kinds(module) == [kind]


def test_softmax_3d_and_prologue() -> None:
    x = randn(2, 5, 300)
    (y,), n = run_program(lambda x: softmax(x * 0.125), [x], fuse=True)
    assert n == 1 and rel(y, np_softmax(x * np.float32(0.125))) <= 1e-5


@pytest.fixture
def unsplit(monkeypatch) -> None:
    """Few long rows stay one program per row (they would be split, test_split_rows)."""
    monkeypatch.setattr(geometry, "SPLIT_MIN_ROW", 1 << 30)


def test_long_rows_use_online_softmax(unsplit) -> None:
    """Rows past the register budget: one online max+sum pass, then the output pass (two reads)."""
    x = randn(2, 40000)
    _, (spec,) = compile_program(softmax, [x], fuse=True)
    loops = [op for op in spec.module.walk() if isinstance(op, scf.ForOp)]
    loads = [op for op in spec.module.walk() if isinstance(op, tt.LoadOp)]
    assert len(loops) == 2 and len(loads) == 2
    assert len(loops[0].results) == 2  # running max and rescaled sum
    (y,), _ = run_program(softmax, [x], fuse=True)
    assert rel(y, np_softmax(x)) <= 1e-5


def test_long_rows_general_reductions(unsplit) -> None:
    """Dependent reductions on a looped row: one pass per level, but a variance around the mean shares the
    mean's pass (running count, mean and M2, Chan's merge); a sum of |a - mean| does not."""
    x = randn(2, 40000) * 3 + 100  # a large mean: the centered form keeps the variance's digits

    def normalize(x):
        d = x - x.mean(axis=-1, keepdims=True)
        return d * ops.rsqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)

    def spread(x):
        return ops.abs(x - x.mean(axis=-1, keepdims=True)).sum(axis=-1)

    for fn, walks in ((normalize, 2), (spread, 2)):
        _, (spec,) = compile_program(fn, [x], fuse=True)
        assert len([op for op in spec.module.walk() if isinstance(op, scf.ForOp)]) == walks
    (y,), _ = run_program(normalize, [x], fuse=True)
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(-1, keepdims=True)
    assert rel(y, d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5)) <= 1e-5
    (s,), _ = run_program(spread, [x], fuse=True)
    assert rel(s, np.abs(d).sum(-1)) <= 1e-5


# ---- general fusion --------------------------------------------------------------------------------


def layernorm(x, w, b):
    d = x - x.mean(axis=-1, keepdims=True)
    return d * ops.rsqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b


PROGRAMS = {
    "layernorm": (
        lambda x, w, b: layernorm(x, w, b),
        lambda x, w, b: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b,
        lambda: [randn(3, 7, 50), randn(50), randn(50)],
    ),
    "column_softmax": (
        lambda x: ops.exp(x - x.max(axis=0, keepdims=True)) / ops.exp(x - x.max(axis=0, keepdims=True)).sum(axis=0, keepdims=True),
        lambda x: np.exp(x - x.max(0, keepdims=True)) / np.exp(x - x.max(0, keepdims=True)).sum(0, keepdims=True),
        lambda: [randn(300, 5)],
    ),
    "middle_axis_long": (
        lambda x: x - x.mean(axis=1, keepdims=True),
        lambda x: x - x.mean(1, keepdims=True),
        lambda: [randn(2, 9000, 3)],
    ),
    "linear_relu": (
        lambda x, w, b: ops.maximum(x @ w.T + b, 0.0),
        lambda x, w, b: np.maximum(x @ w.T + b, 0),
        lambda: [randn(37, 40), randn(45, 40), randn(45)],
    ),
    "batched_matmul": (
        lambda a, b: a @ b * 2.0,
        lambda a, b: a @ b * 2,
        lambda: [randn(3, 17, 20), randn(20, 23)],
    ),
    "embedding_rmsnorm": (
        lambda t, i, w: rmsnorm(ops.take(t, i, axis=0), w),
        lambda t, i, w: np_rmsnorm(np.take(t, i, axis=0), w),
        lambda: [randn(10, 64), rng.integers(-10, 10, (3, 4)).astype(np.int32), randn(64)],
    ),
    "sum_all": (lambda x: x.sum(), lambda x: x.sum(), lambda: [randn(6, 9)]),
    "int_arith": (
        lambda a, b: (a // (b + 100)) % 7 + (a << 2),
        lambda a, b: (a // (b + 100)) % 7 + (a << 2),
        lambda: [rng.integers(-1000, 1000, (5, 9)).astype(np.int32), rng.integers(0, 10, (9,)).astype(np.int32)],
    ),
    "float16": (
        lambda x: ops.exp(x) + x.max(axis=-1, keepdims=True),
        lambda x: np.exp(x) + x.max(-1, keepdims=True),
        lambda: [randn(5, 300, dtype=np.float16)],
    ),
    "where_broadcast": (
        lambda x, y: ops.where(x > y, x, y * 3.0),
        lambda x, y: np.where(x > y, x, y * 3),
        lambda: [randn(4, 6), randn(6)],
    ),
    "transpose_view": (lambda x: x.T * 2.0, lambda x: x.T * 2, lambda: [randn(5, 7)]),
    "pow": (
        lambda x, y: x**y,
        lambda x, y: x**y,
        lambda: [np.array([[-2, 2, 0, 3.0, -1.5]], np.float32), np.array([3, 0.5, 0, 2, 2], np.float32)],
    ),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs(name: str) -> None:
    fn, ref, make = PROGRAMS[name]
    args = make()
    (fused,), n_fused = run_program(fn, args, fuse=True)
    (unfused,), n_unfused = run_program(fn, args, fuse=False)
    assert n_fused == 1 <= n_unfused
    expected = np.asarray(ref(*args))
    assert fused.shape == expected.shape
    np.testing.assert_array_equal(fused, unfused)
    tol = 2e-3 if fused.dtype == np.float16 else 1e-5
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(fused, expected, rtol=tol, atol=tol * max(1.0, float(np.nanmax(np.abs(expected)))))


def test_sibling_reductions_share_a_kernel() -> None:
    x = randn(6, 100)
    (s, m), n = run_program(lambda x: (x.sum(axis=-1), x.max(axis=-1, keepdims=True)), [x], fuse=True)
    assert n == 1
    np.testing.assert_allclose(s, x.sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, x.max(-1, keepdims=True))


def test_index_arithmetic_reshaped_to_a_column_is_recomputed_in_the_kernel() -> None:
    """T5's relative-position buckets: `arange` cast before `reshape(n, 1)`. The cast's layout follows the reshape
    after it (was: a kernel per column index, reading three copies of it)."""

    def buckets(x):
        i = ops.arange(8).astype(np.int64).reshape(8, 1)
        j = ops.arange(8).astype(np.int64).reshape(1, 8)
        distance = -ops.minimum(j - i, 0)
        return x + ops.where(distance < 3, distance, 2 * distance) + distance

    x = randn(8, 8)
    (out,), n = run_program(buckets, [x], fuse=True)
    assert n == 1
    distance = -np.minimum(np.arange(8)[None, :] - np.arange(8)[:, None], 0)
    np.testing.assert_allclose(out, x + np.where(distance < 3, distance, 2 * distance) + distance)


def test_relative_position_bias_is_one_kernel() -> None:
    """`emb[buckets].transpose(2, 0, 1)`: the buckets computed along both axes and the gather from the table's
    columns in one kernel (tinyton-push-layouts takes from the transposed table)."""

    def bias(emb):
        i = ops.arange(8).astype(np.int64).reshape(8, 1)
        j = ops.arange(8).astype(np.int64).reshape(1, 8)
        return ops.transpose(emb[ops.minimum(ops.abs(j - i), 31)], (2, 0, 1))

    emb = randn(32, 4)
    (out,), n = run_program(bias, [emb], fuse=True)
    assert n == 1
    buckets = np.minimum(np.abs(np.arange(8)[None, :] - np.arange(8)[:, None]), 31)
    np.testing.assert_array_equal(out, emb[buckets].transpose(2, 0, 1))


def test_refused_pattern_is_still_one_kernel() -> None:
    def softmax_and_exp(x):
        e = ops.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True), e

    x = randn(4, 33)
    module, specs = compile_program(softmax_and_exp, [x], fuse=True)
    assert kinds(module) == ["row_reduction"] and len(specs[0].outputs) == 2


def test_cycle_check_is_what_keeps_the_plan_acyclic(monkeypatch: pytest.MonkeyPatch) -> None:
    """exp feeds a matmul and the matmul's consumer: merging exp into that consumer is a cycle."""

    def program(x, w):
        e = ops.exp(x)
        return ((e @ w) * e).sum(axis=-1)

    args = [randn(16, 16), randn(16, 16)]
    module, _ = compile_program(program, args, fuse=True)
    assert kinds(module) == ["elementwise", "matmul_epilogue", "row_reduction"]
    monkeypatch.setattr(Planner, "creates_cycle", lambda self, a, b, reach=None: False)
    with pytest.raises(CycleError):
        compile_program(program, args, fuse=True)


def test_transpose_needs_memory_unless_it_is_a_view() -> None:
    from xdsl.dialects.builtin import Float32Type, TensorType
    from xdsl.ir import Block

    block = Block(arg_types=[TensorType(Float32Type(), [4, 4])])
    e = tta.ExpOp(block.args[0])
    t = tta.TransposeOp(e.result, [1, 0])
    with pytest.raises(NotFusable, match="layout"):
        analyze([e, t], [t.result])
    t_in = tta.TransposeOp(block.args[0], [1, 0])
    e_t = tta.ExpOp(t_in.result)
    dom = analyze([t_in, e_t], [e_t.result])
    assert dom.views[t_in.result].strides == (1, 4)


def test_fuse_is_idempotent() -> None:
    from tinyton.rewrites.pipeline import fuse_module

    module, _ = compile_program(rmsnorm, [randn(4, 8), randn(8)], fuse=True)
    before = str(module)
    fuse_module(module, fuse=True)
    assert str(module) == before


# ---- codegen strategies and heuristics ----------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, block, rows, warps, grid",
    [
        ((4096, 4096), 4096, 1, 8, 4096),
        ((57344, 2048), 2048, 1, 8, 57344),
        ((8192, 1024), 1024, 1, 4, 8192),
        ((32, 2048), 2048, 1, 8, 32),
        ((8192, 128), 128, 16, 8, 512),
        ((1024, 32768), 32768, 1, 16, 1024),
        ((264, 100000), 4096, 1, 8, 264),
    ],
)
def test_row_heuristics(shape, block, rows, warps, grid) -> None:
    x = np.zeros(shape, np.float32)
    for fn, args in ((softmax, [x]), (rmsnorm, [x, np.zeros(shape[-1], np.float32)])):
        _, (spec,) = compile_program(fn, args, fuse=True)
        assert (spec.tiles["BLOCK"], spec.tiles["ROWS"], spec.num_warps, spec.grid) == (block, rows, warps, (grid, 1, 1))
        assert spec.module.attributes["tt.num_warps"].value.data == warps


def test_kernel_spec_binds_buffers() -> None:
    _, (spec,) = compile_program(rmsnorm, [randn(4, 8), randn(8)], fuse=True)
    assert [(p.role, p.index, p.name) for p in spec.params] == [("input", 0, "x"), ("input", 1, "w"), ("output", 0, "out0")]
    fn = spec.kernel
    assert all(isinstance(t, tt.PointerType) for t in fn.function_type.inputs.data)
    assert all(d.data["tt.divisibility"].value.data == 16 for d in fn.arg_attrs.data)
    assert [v.name_hint for v in spec.inputs] == ["x", "w"] and len(spec.outputs) == 1


def test_flat_elementwise_kernel_and_alias() -> None:
    x = randn(3000)
    _, (spec,) = compile_program(lambda x: x * 2.0 + 1.0, [x], fuse=True)
    assert spec.kind == "elementwise" and spec.tiles["BLOCK"] == 1024 and spec.grid == (3, 1, 1)
    out = np.zeros_like(x)
    run(spec.module, spec.grid, [x, out])
    np.testing.assert_allclose(out, x * 2 + 1)
    _, (spec,) = compile_program(lambda x: x.reshape(6, 500), [x], fuse=True)
    assert spec.alias == 0


@pytest.mark.parametrize("shape, axis", [((9000, 3), 0), ((2, 9000, 3), 1)])
def test_long_column_variance(shape, axis: int) -> None:
    """A looped column reduction pairs the variance with its mean too (running values of shape [1, BI])."""
    x = randn(*shape) * 2 + 50

    def normalize(x):
        d = x - x.mean(axis=axis, keepdims=True)
        return (d * d).mean(axis=axis), d * ops.rsqrt((d * d).mean(axis=axis, keepdims=True))

    _, (spec,) = compile_program(normalize, [x], fuse=True)
    assert len([op for op in spec.module.walk() if isinstance(op, scf.ForOp)]) == 2
    (var, y), _ = run_program(normalize, [x], fuse=True)
    x64 = x.astype(np.float64)
    assert rel(var, x64.var(axis)) <= 1e-5
    assert rel(y, (x64 - x64.mean(axis, keepdims=True)) / np.sqrt(x64.var(axis, keepdims=True))) <= 1e-5
