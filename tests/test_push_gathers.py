"""`tinyton-push-gathers` (tinyton/rewrites/gathers.py): a gather of a computed elementwise value gathers its
operands, so cross-entropy's log-probabilities are never written; same values and errors as NumPy, fused or not,
on the simulator and (marked `gpu`) on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyton as tt
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.cli.graph import fusions
from tinyton.frontend.programs import fused_modules
from tinyton.runtime.simulator.errors import DeviceAssertionError


@tt.jit
def cross_entropy(logits, labels):
    logp = logits - tt.logsumexp(logits, axis=-1, keepdims=True)
    return -tt.take_along_axis(logp, labels[:, None], axis=-1).mean()


def numpy_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    lse = np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)) + x.max(-1, keepdims=True)
    return -np.take_along_axis(x - lse, labels[:, None].astype(np.int64), -1).mean()


def test_cross_entropy_writes_no_log_probabilities() -> None:
    """The first region yields the rows' logsumexp only; the second gathers one logit a row from the input."""
    logits = np.zeros((64, 1000), np.float32)
    _, fused = fused_modules(cross_entropy.fn, [logits, np.zeros(64, np.int32)])
    regions = fusions(fused)
    assert len(regions) == 2
    assert [shape_of(v.type) for v in regions[0].outputs] == [(64,)]
    assert [shape_of(v.type) for v in regions[1].inputs] == [(64,), (64, 1000), (64,)]  # labels, logits, lse
    assert sum(isinstance(op, tta.TakeOp) for op in regions[1].block.ops) == 2


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_cross_entropy_matches_numpy(fuse: bool) -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((37, 301)).astype(np.float32) * 4
    labels = rng.integers(-301, 301, 37).astype(np.int32)  # negative labels wrap, as in NumPy
    got = cross_entropy.compile(logits, labels, fuse=fuse)(logits, labels)
    np.testing.assert_allclose(got, numpy_cross_entropy(logits, labels), rtol=1e-5)
    wrong = np.where(np.arange(37) == 5, 301, labels).astype(np.int32)
    with pytest.raises(DeviceAssertionError, match="out of bounds"):
        cross_entropy.compile(logits, wrong, fuse=fuse)(logits, wrong)


@tt.jit
def gathered_root_of_a_scalar(x, i):
    return tt.sqrt(tt.sum(x))[None][i]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_a_gather_of_scalars_only_stays(fuse: bool) -> None:
    """Fuzz seed 66 case 919: the gather of a reshaped scalar's root (`std(x)[..., None][..., i]`) was pushed
    onto the root's scalar operand, giving `sqrt` of a scalar a tile's type (xDSL's VerifyException). Nothing
    is gathered there, so the gather stays: its values, and its IndexError for an index out of bounds."""
    x = np.arange(1, 5, dtype=np.float32)
    for i in (np.zeros((0, 3), np.int32), np.array([[0, -1], [0, 0]], np.int32)):
        got = gathered_root_of_a_scalar.compile(x, i, fuse=fuse)(x, i)
        np.testing.assert_allclose(got, np.sqrt(x.sum())[None][i], rtol=1e-6)
    wrong = np.array([0, 1], np.int32)
    with pytest.raises(DeviceAssertionError, match="out of bounds"):
        gathered_root_of_a_scalar.compile(x, wrong, fuse=fuse)(x, wrong)


SHAPES = st.sampled_from([(5, 7), (3, 1, 6), (4, 3, 5), (1, 9), (6, 1)])


@st.composite
def gathered_expressions(draw: st.DrawFn):
    """x (the full shape), two operands broadcast into it (size-1 dims drawn), an axis, indices, a dtype."""
    shape = draw(SHAPES)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    broadcast = [tuple(d if draw(st.booleans()) else 1 for d in shape)[draw(st.integers(0, len(shape))):]
                 for _ in range(2)]
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    idx_shape = tuple(draw(st.sampled_from((1, 2))) if a == axis % len(shape) else d for a, d in enumerate(shape))
    idx = rng.integers(-n, n, idx_shape)
    dtype = draw(st.sampled_from((np.int32, np.int64, np.uint8)))
    idx = (np.where(idx < 0, idx + n, idx) if dtype == np.uint8 else idx).astype(dtype)
    x, a, b = (rng.standard_normal(s).astype(np.float32) for s in (shape, *broadcast))
    return x, a, b, idx, axis


def _expression(x, a, b):
    return np.where(a > 0, x * a, x - b) if isinstance(x, np.ndarray) else tt.where(a > 0, x * a, x - b)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@settings(max_examples=40, deadline=None)
@given(case=gathered_expressions())
def test_gathers_of_broadcast_expressions_match_numpy(fuse: bool, case) -> None:
    x, a, b, idx, axis = case
    want = np.take_along_axis(_expression(x, a, b), idx.astype(np.int64), axis)
    program = tt.jit(lambda x, a, b, i: tt.take_along_axis(_expression(x, a, b), i, axis))
    got = program.compile(x, a, b, idx, fuse=fuse)(x, a, b, idx)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_flat_take_of_broadcast_sum() -> None:
    """`tt.take(x + row, i)` with no axis: the flattened value, negative indices wrapped."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    row = np.float32([[100], [200], [300]])
    idx = np.array([0, -1, 5, 7], np.int64)
    got = tt.jit(lambda x, r, i: tt.take(x + r, i, axis=None))(x, row, idx)
    np.testing.assert_array_equal(got, np.take(x + row, idx))


@pytest.mark.gpu
def test_cross_entropy_matches_numpy_on_gpu() -> None:
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((300, 32000)).astype(np.float32) * 4
    labels = rng.integers(-32000, 32000, 300).astype(np.int32)
    np.testing.assert_allclose(cross_entropy(logits, labels), numpy_cross_entropy(logits, labels), rtol=1e-5)
