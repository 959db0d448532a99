"""Sorts of rows longer than one program holds (MAX_SORTED_ROW), sorted in chunks and merged
(tinyton/rewrites/long_sorts.py): `np.sort`, `np.argsort`, descending, and the order statistics on them, against
NumPy bit for bit (NaN, ±0.0, ±inf and ties in place; argsort NumPy's stable indices). The rewrite on the reference
interpreter for every dtype, the kernels on the simulator (marked `gpu` on the GPU), the kernels it makes."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
import test_numpy_order_statistics as statistics
from test_numpy_sort import DTYPES, descending, same, values
from xdsl.context import Context

import tinyton as tt
from tinyton.cli.graph import fusions
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.frontend.programs import fused_modules
from tinyton.frontend.reference import evaluate
from tinyton.frontend.tracing import trace
from tinyton.limits import MAX_SORTED_ROW, max_sorted_row
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.ptx import assemble_ptx, compile_llvm_module
from tinyton.lowering.tt_to_llvm import lower_to_llvm
from tinyton.rewrites.long_sorts import SplitLongSortsPass, chunking
from tinyton.rewrites.pipeline import fuse_module
from toolchains import TOOLCHAINS, needs_ptxas


def sorts(a: Any, axis: int | None = -1) -> tuple[Any, ...]:
    down = tt.sort(a, axis, descending=True), tt.argsort(a, axis, descending=True)
    return np.sort(a, axis), np.argsort(a, axis), *down


def check_sorts(got: tuple[np.ndarray, ...], x: np.ndarray, axis: int | None = -1) -> None:
    same(got[0], np.sort(x, axis, kind="stable"))
    same(got[1], np.argsort(x, axis, kind="stable"))
    same(got[2], descending(x, axis)[0])
    same(got[3], descending(x, axis)[1])


def test_chunking() -> None:
    """The fewest chunks, a power of two of them, of at most the longest row a program sorts (half as long for
    64-bit values), padding less than one per chunk."""
    assert (max_sorted_row(8), max_sorted_row(32), max_sorted_row(64)) == (MAX_SORTED_ROW, 8192, 4096)
    assert chunking(MAX_SORTED_ROW + 1, MAX_SORTED_ROW) == (2, 4097)
    assert chunking(2 * MAX_SORTED_ROW, MAX_SORTED_ROW) == (2, MAX_SORTED_ROW)
    assert chunking(100000, MAX_SORTED_ROW) == (16, 6250)
    assert chunking(128256, MAX_SORTED_ROW) == (16, 8016)  # Llama 3's vocabulary
    assert chunking(10**6, MAX_SORTED_ROW) == (128, 7813)
    assert chunking(5000, max_sorted_row(64)) == (2, 2500)


@pytest.mark.parametrize("length", [MAX_SORTED_ROW + 1, 70001], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_split_sorts_match_numpy_on_the_reference(dtype: Any, length: int) -> None:
    """The rewritten program (chunk sorts by the row op's semantics, merges of tta ops) on the reference
    interpreter: two rows, two to thirty-two chunks, the last one padded."""
    x = values((2, length), dtype, length)
    module = trace(sorts, [x])
    SplitLongSortsPass().apply(Context(), module)
    module.verify()
    longest = max_sorted_row(np.dtype(dtype).itemsize * 8)
    assert all(shape_of(op.input.type)[-1] <= longest for op in module.walk() if isinstance(op, tta.SortingOp))
    check_sorts(tuple(evaluate(module, x)), x)


CASES = [((MAX_SORTED_ROW + 1,), np.float32, -1), ((16384,), np.int32, -1), ((25000,), np.float16, -1),
         ((2, 10000), np.float32, -1), ((5000, 1), np.float64, 0), ((2, 4250), ml_dtypes.bfloat16, None)]  # fmt: skip


def _long_rows(backend: str):
    @pytest.mark.parametrize("shape, dtype, axis", CASES, ids=lambda c: str(c) if isinstance(c, tuple) else None)
    def test(shape: tuple[int, ...], dtype: Any, axis: int | None, request) -> None:
        """Rows of 8193 (two chunks, one padded), 16384, 25000 (four chunks), two rows of 10000, a column of
        5000 float64 values (two chunks: 64-bit rows are half as long) and 8500 elements flattened (axis=None);
        floats with NaN, ±inf, ±0.0 and ties. On a GPU each case compiles one chunk-sort kernel of 8192 (4096)
        lanes, both directions, and a merge kernel per pass and direction."""
        request.getfixturevalue(backend)
        x = values(shape, dtype, shape[0])
        check_sorts(tt.jit(lambda a: sorts(a, axis))(x), x, axis)

    return test


test_long_rows = _long_rows("simulator")
test_long_rows_on_gpu = pytest.mark.gpu(_long_rows("gpu"))


def test_kernels_a_sort_and_an_argsort_share(simulator) -> None:
    """A sort and an argsort of one long row: one kernel sorting its chunks (one network for both), then one
    per merge pass; the producer of a row read whole is its own kernel (the chunks are a reshape)."""
    x = np.zeros((2, 25000), np.float32)
    _, fused = fused_modules(lambda a: (np.sort(a), np.argsort(a)), [x])
    regions = fusions(fused)
    assert [r.kind.data for r in regions] == ["row_reduction", "elementwise", "elementwise"]
    chunk_sorts = [op for op in regions[0].block.ops if isinstance(op, tta.SortingOp)]
    assert [type(op) for op in chunk_sorts] == [tta.SortOp, tta.ArgSortOp]
    assert {shape_of(op.input.type) for op in chunk_sorts} == {(2, 4, 6250)}


def test_sorts_of_one_column_share_their_chunk_sorts() -> None:
    """`np.sort(x, 0)` and `np.argsort(x, 0)` each move the axis last with a transpose of their own: the sorts of
    one direction share one chunk sort all the same (two networks for the two directions, not four)."""
    x = values((40000, 3), np.float32, 4)
    module = trace(lambda a: sorts(a, 0), [x])
    SplitLongSortsPass().apply(Context(), module)
    assert sum(isinstance(op, tta.SortOp) for op in module.walk()) == 2
    check_sorts(tuple(evaluate(module, x)), x, 0)


def test_median_and_quantiles_of_a_million(simulator) -> None:
    """np.median and np.quantile of 10**6 values: a sort of 128 chunks merged seven times, read where asked."""
    x = np.random.default_rng(1).standard_normal(10**6).astype(np.float32)
    got = tt.jit(lambda a: (np.median(a), np.quantile(a, [0.001, 0.5, 0.75]), np.percentile(a, 99.9)))(x)
    statistics.same(got[0], np.median(x))
    statistics.same(got[1], np.quantile(x, [0.001, 0.5, 0.75]))
    statistics.same(got[2], np.percentile(x, 99.9))


def test_order_statistics_of_long_rows(simulator) -> None:
    """The nan* forms of rows holding NaN, an all-NaN row, integer medians (float64) and partitions, rows of
    50000 and 100000 (NumPy's medians pick -0.0 or 0.0 among equal values its own way: compared by value)."""
    x = values((2, 50000), np.float32, 5)
    x[1] = np.nan
    ints = np.random.default_rng(2).integers(-1000, 1000, 100000).astype(np.int32)
    got = tt.jit(lambda a, i: (np.nanmedian(a, 1), np.nanquantile(a, [0.1, 0.9], 1), np.median(a, 1),
                               np.median(i), np.quantile(i, 0.3, method="nearest"), np.partition(i, 5),
                               np.argpartition(a, 100, 1)))(x, ints)
    statistics.same(got[0], statistics.numpy(np.nanmedian, x, 1))
    statistics.same(got[1], statistics.numpy(np.nanquantile, x, [0.1, 0.9], 1))
    statistics.same(got[2], statistics.numpy(np.median, x, 1))
    statistics.same(got[3], np.median(ints))
    statistics.same(got[4], np.quantile(ints, 0.3, method="nearest"))
    same(got[5], np.sort(ints))
    same(got[6], np.argsort(x, 1, kind="stable"))


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_merge_kernels_lower_to_ptx_that_ptxas_takes(toolchain: str) -> None:
    """The merge pass of a sort and an argsort of float16 rows (the chunk sorts are the row op's kernels, which
    tests/test_numpy_sort.py lowers)."""
    module = trace(lambda a: (np.sort(a), np.argsort(a)), [np.zeros((2, 10000), np.float16)])
    fuse_module(module, True)
    (merge,) = [spec for spec in fusion_to_kernels(module) if spec.kind != "row_reduction"]
    lower_to_llvm(merge.module, None)
    assemble_ptx(compile_llvm_module(merge.module, arch="sm_90", toolchain=toolchain)["ptx"], "sm_90")
