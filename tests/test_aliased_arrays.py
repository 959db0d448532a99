"""Host arrays that share memory as kernel arguments: in-place kernels (`add_kernel(x, y, x, n)`) and partly
overlapping views of one base array. The simulator works on the arrays' own memory; the GPU stages the union
of their spans once and copies it back once (tinyton/runtime/staging.py), so both give NumPy's answer."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as triton
import tinyton.language as tl
from tinyton.runtime.staging import alias_groups


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """Triton's vector-add tutorial kernel."""
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def bump_then_double(a_ptr, b_ptr, NA: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    """a += 1, then (after a barrier, so b reads a's writes) b *= 2: a and b overlap."""
    offs = tl.arange(0, BLOCK)
    tl.store(a_ptr + offs, tl.load(a_ptr + offs, mask=offs < NA) + 1, mask=offs < NA)
    tl.debug_barrier()
    tl.store(b_ptr + offs, tl.load(b_ptr + offs, mask=offs < NB) * 2, mask=offs < NB)


def _in_place():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    expected = x + y
    return x, y, expected


def _overlapping():
    base = np.arange(16, dtype=np.int32)
    expected = base.copy()
    expected[:12] += 1
    expected[4:] *= 2
    return base, expected


def test_in_place_add_kernel():
    x, y, expected = _in_place()
    add_kernel[(triton.cdiv(1000, 256),)](x, y, x, 1000, BLOCK_SIZE=256)
    np.testing.assert_array_equal(x, expected)


def test_partly_overlapping_views_of_one_base():
    base, expected = _overlapping()
    bump_then_double[(1,)](base[:12], base[4:], NA=12, NB=12, BLOCK=16)
    np.testing.assert_array_equal(base, expected)


def test_alias_groups_are_transitive_and_skip_disjoint_and_empty_arrays():
    base = np.zeros(64, np.float32)
    other = np.zeros(8, np.float32)
    arrays = {0: base[:10], 1: base[8:20], 2: base[18:30], 3: base[40:], 4: other, 5: base[:0]}
    assert sorted(alias_groups(arrays)) == [[0, 1, 2], [3], [4]]
    assert alias_groups({0: base[::4], 1: base[1::4]}) == [[0, 1]]  # interleaved strided views share a span


def test_torch_cpu_tensors_in_place():
    torch = pytest.importorskip("torch")
    x, y, expected = _in_place()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    add_kernel[(4,)](xt, yt, xt, 1000, BLOCK_SIZE=256)
    np.testing.assert_array_equal(xt.numpy(), expected)


@pytest.mark.gpu
def test_aliased_host_arrays_on_the_gpu():
    x, y, expected = _in_place()
    add_kernel.compile(x, y, x, 1000, BLOCK_SIZE=256).launch((4,), [x, y, x, 1000])
    np.testing.assert_array_equal(x, expected)
    base, expected = _overlapping()
    a, b = base[:12], base[4:]
    bump_then_double.compile(a, b, NA=12, NB=12, BLOCK=16).launch((1,), [a, b])
    np.testing.assert_array_equal(base, expected)
    offset = np.ones(20, np.float32)[1:]  # a union that starts 4 bytes past 16: each address keeps its mod 16
    x, out = offset[:9], offset[:9]
    add_kernel.compile(x, x, out, 9, BLOCK_SIZE=16).launch((1,), [x, x, out, 9])
    np.testing.assert_array_equal(offset, [2] * 9 + [1] * 10)
