"""The core of the tinyton language: builtin dispatch, program geometry, tile construction, memory,
selection, casts and `dot`.

Every user-facing op is a *builtin*: a short documented function whose body forwards to the kernel being
compiled. The code generator (tinyton/frontend/codegen.py) resolves a call such as `tl.exp(x)` to the
function object and calls it with `Tile`s and constexpr values while a `TileBuilder` is active; the rules
(promotion, broadcasting, checks) live in tinyton/frontend/semantic.py and its mixins. Called on traced
arrays (array programs) a builtin forwards to `ARRAY_IMPLS[name]`, which tinyton/frontend/array_ops.py
fills. Called anywhere else it says where it belongs.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tinyton.dtypes import float32
from tinyton.errors import CompilationError, error
from tinyton.frontend.jit import JITFunction
from tinyton.lazy import lazy_module

block_pointers = lazy_module("tinyton.frontend.block_pointers")
traced_values = lazy_module("tinyton.frontend.traced")  # its ARRAY_IMPLS: filled by tinyton/frontend/array_ops.py
values = lazy_module("tinyton.frontend.values")

F = TypeVar("F", bound=Callable[..., Any])

_ARRAY_SPELLINGS = {"keep_dims": "keepdims"}
"""Triton's keyword spellings -> NumPy's, for the array-program implementations."""


def builtin(fn: F) -> F:
    """Make `fn` a builtin: kernel semantics while compiling, `ARRAY_IMPLS` on traced arrays."""
    name = fn.__name__

    @functools.wraps(fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if values.KERNEL_BUILDERS:
            return fn(*args, **kwargs)
        traced = any(hasattr(a, "__tt_traced__") for a in (*args, *kwargs.values()))
        if traced or traced_values.is_tracing():
            impl = traced_values.ARRAY_IMPLS.get(name)
            if impl is None:
                raise error(_not_in_array_programs(name))
            return impl(*args, **{_ARRAY_SPELLINGS.get(k, k): v for k, v in kwargs.items()})
        raise RuntimeError(f"tt.{name} must be called inside a @tt.jit function")

    dispatch.__tt_builtin__ = name  # type: ignore[attr-defined]
    return dispatch  # type: ignore[return-value]


KERNEL_ONLY = frozenset({
    "load", "store", "program_id", "num_programs", "make_block_ptr", "advance", "make_tensor_descriptor",
    "debug_barrier", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
    "atomic_xchg", "atomic_cas",
})
"""Builtins of pointers and programs: they exist in kernels only."""


def _not_in_array_programs(name: str) -> str:
    if name not in KERNEL_ONLY:
        return f"tt.{name} is not supported in array programs"
    return (
        f"tt.{name} works on pointers and programs, so it runs in kernels only; but this @tt.jit function was "
        "called directly, fn(x), which runs it as an array program (whole arrays, NumPy semantics, no pointers). "
        "Launch it as a kernel instead: store the result (tl.store(out_ptr + offsets, value)) rather than "
        "returning it, and call fn[grid](x, out, ...); or write the array program with array operations "
        "(x * 2, tt.exp(x), x.sum(axis=-1))"
    )


def kernel() -> Any:
    """The `TileBuilder` of the kernel being compiled."""
    return values.KERNEL_BUILDERS[-1]


def static_range(arg1: int, arg2: int | None = None, step: int | None = None) -> builtins.range:
    """`range` that a kernel always unrolls at compile time (its bounds must be constexpr)."""
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    return builtins.range(start, end, 1 if step is None else step)


static_range.__tt_builtin__ = "static_range"  # type: ignore[attr-defined] - the code generator unrolls it


def range(  # Triton's spelling: tt.range
    arg1: int,
    arg2: int | None = None,
    step: int | None = None,
    num_stages: int | None = None,
    loop_unroll_factor: int | None = None,
    disallow_acc_multi_buffer: bool = False,
    flatten: bool = False,
    warp_specialize: bool = False,
) -> builtins.range:
    """A loop that always becomes `scf.for` (never unrolled by the frontend). `num_stages` and
    `loop_unroll_factor` travel as `tt.num_stages` / `tt.loop_unroll_factor` attributes of the loop for
    the lowering (the software pipeliner reads the first); `warp_specialize=True` asks it for a producer
    warpgroup loading the loop's TMA operands while the program's warps compute (sm_90a); the other Triton
    hints are accepted and ignored."""
    return static_range(arg1, arg2, step)


range.__tt_builtin__ = "range"  # type: ignore[attr-defined] - the code generator emits an scf.for


def jit(
    fn: Callable[..., Any] | None = None,
    *,
    do_not_specialize: Sequence[str | int] = (),
    do_not_specialize_on_alignment: Sequence[str | int] = (),
    noinline: bool = False,
    debug: bool | None = None,
    version: Any = None,
    repr: Any = None,  # Triton's keyword
    launch_metadata: Any = None,
) -> Any:
    """Compile `fn` on first use: a kernel (no `return <value>`, launch with `fn[grid](...)`) or an
    array program (returns arrays, call it directly). `@tt.jit` and `@tt.jit(...)` both work.

    `do_not_specialize` names (or numbers) parameters whose values are not specialised on (no
    16-divisibility); `noinline=True` is accepted, but calls are still inlined; `debug` is kept on the
    function (`fn.debug`). `version`, `repr` and `launch_metadata` are accepted and ignored."""

    def decorate(f: Callable[..., Any]) -> JITFunction:
        return JITFunction(
            f,
            do_not_specialize=(*do_not_specialize, *do_not_specialize_on_alignment),
            noinline=noinline,
            debug=debug,
        )

    return decorate if fn is None else decorate(fn)


# ---- program geometry and tile construction --------------------------------------------------


@builtin
def program_id(axis: int) -> Any:
    """Index of this program along grid axis 0, 1 or 2 (CUDA's blockIdx)."""
    return kernel().program_id(axis)


@builtin
def num_programs(axis: int) -> Any:
    """Number of programs along grid axis 0, 1 or 2 (CUDA's gridDim)."""
    return kernel().num_programs(axis)


@builtin
def arange(start: int, end: int) -> Any:
    """`[start, ..., end-1]` as an int32 tile; constexpr bounds, `end - start` a power of two."""
    return kernel().arange(start, end)


@builtin
def full(shape: int | Sequence[int], value: Any, dtype: Any) -> Any:
    """A tile of `shape` filled with `value` converted to `dtype`."""
    return kernel().full(shape, value, dtype)


@builtin
def zeros(shape: int | Sequence[int], dtype: Any = float32) -> Any:
    """A tile of zeros, e.g. the accumulator of a matmul."""
    return kernel().full(shape, 0, dtype)


@builtin
def zeros_like(x: Any) -> Any:
    """Zeros of `x`'s shape and dtype."""
    return kernel().full(x.shape, 0, x.dtype)


# ---- memory ------------------------------------------------------------------------------------


@builtin
def load(
    pointer: Any,
    mask: Any = None,
    other: Any = None,
    boundary_check: Sequence[int] = (),
    padding_option: str = "",
    cache_modifier: str = "",
    eviction_policy: str = "",
    volatile: bool = False,
) -> Any:
    """Read through a pointer (tile); lanes where `mask` is false read nothing and give `other` (0).
    Through a block pointer: the block, elements outside the array on the `boundary_check` dimensions
    giving `padding_option` ("zero", or "nan").

    `cache_modifier` (".ca", ".cg", ".cv") and `eviction_policy` ("evict_first", "evict_last") go to the
    PTX load; a `volatile` load (`ld.volatile`) reads memory every time it runs, for loops that wait on
    a flag other programs write."""
    if isinstance(pointer, block_pointers.BlockPointer):
        return kernel().load_block(pointer, boundary_check, padding_option)
    return kernel().load(pointer, mask, other, cache_modifier, eviction_policy, volatile)


@builtin
def store(
    pointer: Any,
    value: Any,
    mask: Any = None,
    boundary_check: Sequence[int] = (),
    cache_modifier: str = "",
    eviction_policy: str = "",
) -> None:
    """Write `value` (converted to the pointee type) through a pointer tile where `mask` is true. Through a
    block pointer: the block, skipping elements outside the array on the `boundary_check` dimensions.

    `cache_modifier` (".wb", ".cg", ".cs", ".wt") and `eviction_policy` go to the PTX store."""
    if isinstance(pointer, block_pointers.BlockPointer):
        kernel().store_block(pointer, value, boundary_check)
        return
    kernel().store(pointer, value, mask, cache_modifier, eviction_policy)


# ---- selection, casts, dot ---------------------------------------------------------------------


@builtin
def where(condition: Any, x: Any, y: Any) -> Any:
    """`x` where `condition` is true, else `y`, elementwise with broadcasting."""
    return kernel().where(condition, x, y)


@builtin
def cast(input: Any, dtype: Any, fp_downcast_rounding: str | None = None, bitcast: bool = False) -> Any:
    """`input` converted to `dtype` (floats to ints truncate); `bitcast=True` reinterprets the bits."""
    return kernel().cast(input, dtype, bitcast)


@builtin
def dot(
    a: Any, b: Any, acc: Any = None, input_precision: str | None = None, out_dtype: Any = float32,
    max_num_imprecise_acc: int | None = None,
) -> Any:
    """`acc + a @ b` for 2-D float tiles (MxK @ KxN, dims >= 16), as Triton's: f16/bf16 operands accumulate
    in `out_dtype` (float32, or float16 for f16 operands); f32 operands take `input_precision` "ieee"
    (default, exact), "tf32" (tensor cores, 10-bit mantissas) or "tf32x3". `acc` defaults to zeros. float8
    operands on sm_90a: `max_num_imprecise_acc` products at most are summed in wgmma's ~13-bit accumulator
    before an f32 add (None, Triton's default: all of K, fast; 32: after every wgmma)."""
    return kernel().dot(a, b, acc, input_precision, out_dtype, max_num_imprecise_acc)


# ---- array-program-only builtins (implemented by the tracer; no tile-level equivalent) ----------


def _array_only(name: str, doc: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise CompilationError(f"tt.{name} is only available in array programs, not in kernels")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


ones = _array_only("ones", "An array of ones: `tt.ones(shape, dtype)`.")
matmul = _array_only("matmul", "NumPy's matmul (`a @ b`).")
scaled_matmul = _array_only(
    "scaled_matmul",
    "`torch._scaled_mm` in array programs: `tt.scaled_matmul(a, b, scale_a, scale_b, out_dtype=tt.bfloat16)` is "
    "`(a @ b) * scale_a * scale_b` for float8 `a` [M, K], `b` [K, N] accumulated in float32, scales per tensor "
    "(a float or one-element float32 array) or per row [M, 1] / column [1, N], cast to `out_dtype` (float32, "
    "float16, bfloat16), all in the matmul kernel's epilogue.",
)
take = _array_only("take", "NumPy's take: gather along axis (`tt.take(table, ids, axis=0)` is an embedding lookup).")
tril = _array_only("tril", "NumPy's tril: zero above the k-th diagonal (`tt.tril(x, k=0)`).")
triu = _array_only("triu", "NumPy's triu: zero below the k-th diagonal (`tt.triu(x, k=0)`).")
swapaxes = _array_only("swapaxes", "NumPy's swapaxes: `tt.swapaxes(k, -1, -2)` transposes the last two axes.")
