"""The tinyton language: what `import tinyton as tt` gives a kernel or array-program author.

Every user-facing op is a *builtin*: a short documented function whose body forwards to the kernel being
compiled. The code generator (tinyton/frontend/codegen.py) resolves a call such as `tt.exp(x)` to the
function object and calls it with `Tile`s and constexpr values while a `TileBuilder` is active; the rules
(promotion, broadcasting, checks) live in tinyton/frontend/semantic.py. Called on traced arrays (array
programs) a builtin forwards to `ARRAY_IMPLS[name]`, which tinyton/frontend/array_ops.py fills. Called
anywhere else it says where it belongs.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tinyton.dialects.tt import MAX_TILE_ELEMENTS  # noqa: F401 - re-exported as tt.MAX_TILE_ELEMENTS
from tinyton.dtypes import DTYPES, bfloat16, dtype, dtype_of, float16, float32, int1, int32  # noqa: F401 - tt.* dtypes
from tinyton.errors import CompilationError
from tinyton.frontend import array_ops  # noqa: F401 - registers the array implementations of the builtins
from tinyton.frontend.autotuner import Config, autotune, heuristics  # noqa: F401 - tt.autotune, tt.Config, tt.heuristics
from tinyton.frontend.block_pointers import BlockPointer
from tinyton.frontend.graphed import Graphed, graphed  # noqa: F401 - tt.graphed: CUDA-graph replay
from tinyton.frontend.jit import JITFunction
from tinyton.frontend.source import constexpr  # noqa: F401 - re-exported as tt.constexpr
from tinyton.frontend.traced import ARRAY_IMPLS, is_tracing
from tinyton.frontend.values import KERNEL_BUILDERS
from tinyton.intmath import cdiv, next_power_of_2  # noqa: F401 - re-exported as tt.cdiv, tt.next_power_of_2
from tinyton.runtime.arrays import DeviceArray, to_device  # noqa: F401 - tt.to_device(x): an array on the GPU
from tinyton.runtime.driver import Stream  # noqa: F401 - tt.Stream(): a CUDA stream
from tinyton.runtime.graphs import CudaGraph  # noqa: F401 - tt.CudaGraph: capture and replay by hand
from tinyton.runtime.streams import stream  # noqa: F401 - `with tt.stream(s):` launches go to s

F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------------
# Compile-time helpers
# ---------------------------------------------------------------------------------------------


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
    the lowering (a software pipeliner may read them); the other Triton hints are accepted and ignored."""
    return static_range(arg1, arg2, step)


range.__tt_builtin__ = "range"  # type: ignore[attr-defined] - the code generator emits an scf.for


# ---------------------------------------------------------------------------------------------
# Builtin dispatch
# ---------------------------------------------------------------------------------------------


def builtin(fn: F) -> F:
    """Make `fn` a builtin: kernel semantics while compiling, `ARRAY_IMPLS` on traced arrays."""
    name = fn.__name__

    @functools.wraps(fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if KERNEL_BUILDERS:
            return fn(*args, **kwargs)
        traced = any(hasattr(a, "__tt_traced__") for a in (*args, *kwargs.values()))
        if traced or is_tracing():
            impl = ARRAY_IMPLS.get(name)
            if impl is None:
                raise CompilationError(f"tt.{name} is not supported in array programs")
            return impl(*args, **kwargs)
        raise RuntimeError(f"tt.{name} must be called inside a @tt.jit function")

    dispatch.__tt_builtin__ = name  # type: ignore[attr-defined]
    return dispatch  # type: ignore[return-value]


def _kernel() -> Any:
    return KERNEL_BUILDERS[-1]


# ---------------------------------------------------------------------------------------------
# Program geometry and tile construction
# ---------------------------------------------------------------------------------------------


@builtin
def program_id(axis: int) -> Any:
    """Index of this program along grid axis 0, 1 or 2 (CUDA's blockIdx)."""
    return _kernel().program_id(axis)


@builtin
def num_programs(axis: int) -> Any:
    """Number of programs along grid axis 0, 1 or 2 (CUDA's gridDim)."""
    return _kernel().num_programs(axis)


@builtin
def arange(start: int, end: int) -> Any:
    """`[start, ..., end-1]` as an int32 tile; constexpr bounds, `end - start` a power of two."""
    return _kernel().arange(start, end)


@builtin
def full(shape: int | Sequence[int], value: Any, dtype: Any) -> Any:
    """A tile of `shape` filled with `value` converted to `dtype`."""
    return _kernel().full(shape, value, dtype)


@builtin
def zeros(shape: int | Sequence[int], dtype: Any = float32) -> Any:
    """A tile of zeros, e.g. the accumulator of a matmul."""
    return _kernel().full(shape, 0, dtype)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


@builtin
def load(ptr: Any, mask: Any = None, other: Any = None, boundary_check: Any = (), padding_option: str = "") -> Any:
    """Read through a pointer (tile); lanes where `mask` is false read nothing and give `other` (0).
    Through a block pointer: the block, elements outside the array on the `boundary_check` dimensions
    giving `padding_option` ("zero", or "nan")."""
    if isinstance(ptr, BlockPointer):
        return _kernel().load_block(ptr, boundary_check, padding_option)
    return _kernel().load(ptr, mask, other)


@builtin
def store(ptr: Any, value: Any, mask: Any = None, boundary_check: Any = ()) -> None:
    """Write `value` (converted to the pointee type) through a pointer tile where `mask` is true. Through a
    block pointer: the block, skipping elements outside the array on the `boundary_check` dimensions."""
    if isinstance(ptr, BlockPointer):
        _kernel().store_block(ptr, value, boundary_check)
        return
    _kernel().store(ptr, value, mask)


@builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any) -> Any:
    """A pointer to a `block_shape` block at `offsets` of the `shape`/`strides` array at `base`."""
    return _kernel().make_block_ptr(base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base: Any, offsets: Any) -> Any:
    """The block pointer moved by `offsets` (elements, per dimension)."""
    return _kernel().advance(base, offsets)


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any) -> Any:
    """A descriptor of the `shape`/`strides` array at `base` whose `.load(offsets)` / `.store(offsets, v)`
    move `block_shape` blocks, elements outside the array reading 0 and not written."""
    return _kernel().make_tensor_descriptor(base, shape, strides, block_shape)


# ---------------------------------------------------------------------------------------------
# Elementwise math
# ---------------------------------------------------------------------------------------------


@builtin
def where(condition: Any, x: Any, y: Any) -> Any:
    """`x` where `condition` is true, else `y`, elementwise with broadcasting."""
    return _kernel().where(condition, x, y)


@builtin
def exp(x: Any) -> Any:
    """e**x (int inputs become float32)."""
    return _kernel().unary("exp", x)


@builtin
def log(x: Any) -> Any:
    """Natural logarithm (int inputs become float32)."""
    return _kernel().unary("log", x)


@builtin
def sqrt(x: Any) -> Any:
    """Square root (int inputs become float32)."""
    return _kernel().unary("sqrt", x)


@builtin
def rsqrt(x: Any) -> Any:
    """1/sqrt(x), one instruction on the GPU (int inputs become float32)."""
    return _kernel().unary("rsqrt", x)


@builtin
def abs(x: Any) -> Any:
    """Absolute value."""
    return _kernel().unary("abs", x)


@builtin
def maximum(x: Any, y: Any) -> Any:
    """Elementwise maximum with broadcasting (NaN-propagating)."""
    return _kernel().binary("maximum", x, y)


@builtin
def minimum(x: Any, y: Any) -> Any:
    """Elementwise minimum with broadcasting (NaN-propagating)."""
    return _kernel().binary("minimum", x, y)


@builtin
def relu(x: Any) -> Any:
    """max(x, 0)."""
    return _kernel().binary("maximum", x, 0)


# ---------------------------------------------------------------------------------------------
# Reductions and dot
# ---------------------------------------------------------------------------------------------


@builtin
def sum(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Sum along `axis` (all axes when None); bool tiles count their true lanes."""
    return _kernel().reduce("sum", x, axis, keepdims)


@builtin
def max(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Maximum along `axis` (all axes when None)."""
    return _kernel().reduce("max", x, axis, keepdims)


@builtin
def min(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Minimum along `axis` (all axes when None)."""
    return _kernel().reduce("min", x, axis, keepdims)


@builtin
def mean(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Arithmetic mean along `axis` (all axes when None), as a float."""
    return _kernel().mean(x, axis, keepdims)


reduce_sum, reduce_max, reduce_min = sum, max, min


@builtin
def dot(a: Any, b: Any, acc: Any = None, input_precision: str | None = None, out_dtype: dtype = float32) -> Any:
    """`acc + a @ b` for 2-D float tiles (MxK @ KxN, dims >= 16), as Triton's: f16/bf16 operands accumulate
    in `out_dtype` (float32, or float16 for f16 operands); f32 operands take `input_precision` "ieee"
    (default, exact), "tf32" (tensor cores, 10-bit mantissas) or "tf32x3". `acc` defaults to zeros."""
    return _kernel().dot(a, b, acc, input_precision, out_dtype)


# ---------------------------------------------------------------------------------------------
# Atomics
# ---------------------------------------------------------------------------------------------


def _atomic(kind: str, doc: str) -> Callable[..., Any]:
    def fn(pointer: Any, val: Any, mask: Any = None, sem: str | None = None, scope: str | None = None) -> Any:
        return _kernel().atomic_rmw(kind, pointer, val, mask, sem, scope)

    fn.__name__ = fn.__qualname__ = f"atomic_{kind}"
    fn.__doc__ = doc + (
        " Gives the old values; masked-off lanes do nothing. `sem`: 'relaxed', 'acquire', 'release' or "
        "'acq_rel' (default); `scope`: 'gpu' (default), 'cta' or 'sys'."
    )
    return builtin(fn)


atomic_add = _atomic("add", "`*pointer += val` atomically, per lane.")
atomic_max = _atomic("max", "`*pointer = max(*pointer, val)` atomically, per lane.")
atomic_min = _atomic("min", "`*pointer = min(*pointer, val)` atomically, per lane.")
atomic_and = _atomic("and", "`*pointer &= val` atomically, per lane (integers).")
atomic_or = _atomic("or", "`*pointer |= val` atomically, per lane (integers).")
atomic_xor = _atomic("xor", "`*pointer ^= val` atomically, per lane (integers).")
atomic_xchg = _atomic("xchg", "`*pointer = val` atomically, per lane.")


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: str | None = None, scope: str | None = None) -> Any:
    """Where `*pointer == cmp`, store `val`, atomically per lane; gives the old values."""
    return _kernel().atomic_cas(pointer, cmp, val, sem, scope)


@builtin
def debug_barrier() -> None:
    """Wait until every thread of the program gets here (CUDA's `__syncthreads()`)."""
    _kernel().debug_barrier()


# ---------------------------------------------------------------------------------------------
# Random numbers (Philox 4x32, as Triton's)
# ---------------------------------------------------------------------------------------------


@builtin
def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: int = 10) -> Any:
    """`n_rounds` rounds of Philox 4x32 on counters `(c0..c3)` keyed by `seed`: four int32 tiles."""
    return _kernel().philox(seed, c0, c1, c2, c3, n_rounds)


@builtin
def randint4x(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """Four blocks of random 32-bit ints (as int32) for a seed and a block of int offsets."""
    return _kernel().randint4x(seed, offset, n_rounds)


@builtin
def randint(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """A block of random 32-bit ints (as int32): the first of `randint4x`."""
    return _kernel().randint4x(seed, offset, n_rounds)[0]


@builtin
def rand4x(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """Four blocks of float32 uniform in [0, 1)."""
    return _kernel().rand4x(seed, offset, n_rounds)


@builtin
def rand(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """A block of float32 uniform in [0, 1): the same offset and seed give the same number."""
    return _kernel().rand4x(seed, offset, n_rounds)[0]


@builtin
def randn4x(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """Four blocks of float32 standard normal samples."""
    return _kernel().randn4x(seed, offset, n_rounds)


@builtin
def randn(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """A block of float32 standard normal samples (Box-Muller of the first two of `randint4x`)."""
    return _kernel().randn4x(seed, offset, n_rounds)[0]


@builtin
def uint_to_uniform_float(x: Any) -> Any:
    """A float32 in [0, 1) from the bits of a random 32-bit int."""
    return _kernel().uint_to_uniform_float(x)


@builtin
def pair_uniform_to_normal(u1: Any, u2: Any) -> Any:
    """Box-Muller: two standard normal samples from two uniforms."""
    return _kernel().pair_uniform_to_normal(u1, u2)


# ---------------------------------------------------------------------------------------------
# Array-program-only builtins (implemented by the tracer; no tile-level equivalent)
# ---------------------------------------------------------------------------------------------


def _array_only(name: str, doc: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise CompilationError(f"tt.{name} is only available in array programs, not in kernels")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


ones = _array_only("ones", "An array of ones: `tt.ones(shape, dtype)`.")
matmul = _array_only("matmul", "NumPy's matmul (`a @ b`).")
reshape = _array_only("reshape", "NumPy's reshape.")
transpose = _array_only("transpose", "NumPy's transpose.")
tril = _array_only("tril", "NumPy's tril: zero above the k-th diagonal (`tt.tril(x, k=0)`).")
triu = _array_only("triu", "NumPy's triu: zero below the k-th diagonal (`tt.triu(x, k=0)`).")
swapaxes = _array_only("swapaxes", "NumPy's swapaxes: `tt.swapaxes(k, -1, -2)` transposes the last two axes.")
broadcast_to = _array_only("broadcast_to", "NumPy's broadcast_to.")
take = _array_only("take", "Gather rows: `tt.take(table, indices, axis=0)` (embedding lookup).")


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


__all__ = [
    "DTYPES",
    "CompilationError",
    "Config",
    "CudaGraph",
    "DeviceArray",
    "Graphed",
    "Stream",
    "abs",
    "advance",
    "arange",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
    "autotune",
    "bfloat16",
    "broadcast_to",
    "cdiv",
    "constexpr",
    "debug_barrier",
    "dot",
    "dtype",
    "dtype_of",
    "exp",
    "float16",
    "float32",
    "full",
    "graphed",
    "heuristics",
    "int1",
    "int32",
    "jit",
    "load",
    "log",
    "make_block_ptr",
    "make_tensor_descriptor",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "next_power_of_2",
    "num_programs",
    "ones",
    "pair_uniform_to_normal",
    "philox",
    "program_id",
    "rand",
    "rand4x",
    "randint",
    "randint4x",
    "randn",
    "randn4x",
    "range",
    "reduce_max",
    "reduce_min",
    "reduce_sum",
    "relu",
    "reshape",
    "rsqrt",
    "sqrt",
    "static_range",
    "store",
    "stream",
    "sum",
    "swapaxes",
    "take",
    "to_device",
    "transpose",
    "tril",
    "triu",
    "uint_to_uniform_float",
    "where",
    "zeros",
]
