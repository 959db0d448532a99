"""Builtins that order, move or count elements by value: `sort`, `topk`, `flip`, `gather`, `histogram`, and
`inline_asm_elementwise` (PTX run on every element; the GPU only: the simulator refuses it); and the
array-program builtins for NumPy's indexing, joining and reshaping functions that have no tile-level
equivalent: `tt.concatenate`, `tt.stack`, `tt.pad`, ... (tinyton/frontend/array_reshaping.py). `flip` is both:
Triton's in kernels, NumPy's (`axis=`) on arrays.
"""

from __future__ import annotations

from typing import Any

from tinyton.language.core import _array_only, builtin, kernel


@builtin
def sort(x: Any, dim: Any = None, descending: Any = False) -> Any:
    """`x` sorted along `dim` (None: the last), ascending unless `descending`: Triton's bitonic network, so
    NaNs land where Triton's put them (comparisons with NaN are false)."""
    return kernel().sort(x, dim, descending)


@builtin
def topk(x: Any, k: Any, dim: Any = None) -> Any:
    """The `k` largest elements along `dim` (None: the last), in descending order (`k` a power of two)."""
    return kernel().sort(x, dim, True, k, "tl.topk")


@builtin
def flip(x: Any, dim: Any = None) -> Any:
    """`x` reversed along `dim` (None: the last)."""
    return kernel().flip(x, dim)


@builtin
def gather(src: Any, index: Any, axis: Any) -> Any:
    """`out[p] = src[p with p[axis] = index[p]]` (`numpy.take_along_axis`); `index` has `src`'s rank and
    sizes except along `axis`. An index outside `[0, src.shape[axis])` is an error on the simulator and
    reads index mod the size on the GPU (Triton leaves it undefined)."""
    return kernel().gather(src, index, axis)


@builtin
def histogram(input: Any, num_bins: Any, mask: Any = None) -> Any:
    """int32 counts of the values `0 ... num_bins - 1` among the elements of `input` where `mask` is true;
    other values are not counted (as Triton's GPU lowering)."""
    return kernel().histogram(input, num_bins, mask)


@builtin
def inline_asm_elementwise(
    asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any
) -> Any:
    """PTX `asm` on every element of `args` (broadcast to one shape), `pack` elements per instance,
    `$0...` the results then the arguments, elements narrower than 32 bits packed into 32-bit registers
    (as Triton); a tuple of dtypes gives a tuple of tiles. The simulator cannot run PTX and refuses."""
    return kernel().inline_asm(asm, constraints, args, dtype, is_pure, pack)


concatenate = _array_only("concatenate", "NumPy's concatenate: join arrays along an axis (`axis=None` flattens).")
stack = _array_only("stack", "NumPy's stack: join arrays of one shape along a new axis.")
array_split = _array_only("array_split", "NumPy's array_split: like split, sections need not divide the axis.")
squeeze = _array_only("squeeze", "NumPy's squeeze: remove size-1 dims (all, or those of axis).")
moveaxis = _array_only("moveaxis", "NumPy's moveaxis: move axes to new positions.")
ravel = _array_only("ravel", "NumPy's ravel: the elements as a 1-D array.")
repeat = _array_only("repeat", "NumPy's repeat: repeat elements (int or constant per-element counts) along axis.")
tile = _array_only("tile", "NumPy's tile: repeat the whole array along each axis.")
pad = _array_only("pad", "NumPy's pad with mode='constant' (pad_width and constant_values in NumPy's forms).")
