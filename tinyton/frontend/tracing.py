"""Trace a Python array program into `tta` IR by running it on `Traced` values.

`trace(fn, args)` calls `fn` with one `Traced` per array argument (other arguments are baked in as
compile-time constants); every operator or `tt.*` builtin applied to a `Traced` appends a `tta` op to
one `func.func` (tinyton/frontend/traced.py). Python control flow therefore runs at trace time, like
jax.jit: the IR is the straight-line dataflow graph that the fusion passes want.

NumPy semantics: implicit broadcasting, NumPy 2's promotion (NEP 50: weak Python scalars, `x * 2` keeps
`x`'s dtype, `i32 * 0.5` is float64), true division giving floats. Errors are
`CompilationError`s naming the user's `file:line` and worded like NumPy's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, UnitAttr, i64
from xdsl.ir import Attribute, Region
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects import tta
from tinyton.errors import CompilationError, call_error, error
from tinyton.frontend import (
    array_assign, array_indexing, array_order_statistics, array_ops, array_reductions, array_reshaping, array_sorting,
    refused, scaled_matmul,
)
from tinyton.frontend.promotion import ARRAY_DTYPES, element_of, is_scalar
from tinyton.frontend.traced import ARRAY_IMPLS, Traced, Tracer

IMPLEMENTATIONS = (
    array_assign, array_indexing, array_order_statistics, array_ops, array_reductions, array_reshaping, array_sorting,
    refused, scaled_matmul,
)
"""The modules that fill `traced.ARRAY_IMPLS` (what NumPy functions, `tt.` builtins and operators do to traced
arrays) as they are imported: tracing needs every one of them loaded."""


def array_implementations() -> dict[str, Callable[..., Any]]:
    """`ARRAY_IMPLS` complete (every module of `IMPLEMENTATIONS` has registered its functions), by NumPy name."""
    return ARRAY_IMPLS


def _argument_type(name: str, value: Any) -> Attribute:
    shape, dtype = tuple(value.shape), value.dtype
    try:
        element = element_of(dtype)
    except TypeError:
        raise error(
            f"argument '{name}' has dtype {dtype}; array programs support {', '.join(ARRAY_DTYPES)} "
            f"(and float8 matmul operands; convert with {name}.astype(np.float32))"
        ) from None
    return tta.array_type(element, shape)


def is_array(value: Any) -> bool:
    """Array-like arguments (NumPy, torch, cupy, device arrays) become traced inputs; the rest constants."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and not is_scalar(value)


def trace(fn: Callable[..., Any], args: Sequence[Any], name: str | None = None) -> ModuleOp:
    """Trace `fn(*args)` into a module holding one `func.func` of tta ops.

    Array arguments become function arguments (named after the Python parameters); other arguments
    are compile-time constants. The function returns one array or a tuple of arrays."""
    fn = getattr(fn, "fn", fn)  # a JITFunction wraps the Python function
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    params = list(signature.parameters) if signature else []
    if signature is not None:
        try:
            signature.bind(*args)
        except TypeError as e:
            raise call_error(f"{fn.__name__}(): {e}; its parameters are ({', '.join(params)})") from None
    tracer = Tracer()
    call_args: list[Any] = []
    for i, value in enumerate(args):
        if not is_array(value):
            call_args.append(value)
            continue
        pname = params[i] if i < len(params) else f"arg{i}"
        arg = tracer.block.insert_arg(_argument_type(pname, value), len(tracer.block.args))
        arg.name_hint = pname
        call_args.append(Traced(tracer, arg))
    inputs = [(a, a.value) for a in call_args if isinstance(a, Traced)]  # an assignment changes `a.value`

    with tracer.active():
        out = fn(*call_args)

    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outputs:
        if not isinstance(o, Traced) or o.tracer is not tracer:
            raise CompilationError(
                f"array program '{fn.__name__}' must return arrays computed from its array arguments "
                f"(or a tuple of them), got {type(o).__name__}",
                fn.__code__.co_filename,
                fn.__code__.co_firstlineno,
            )
    results = [o.value for o in outputs]
    tracer.check_fresh(results)
    updated = [(i, a.value) for i, (a, arg) in enumerate(inputs) if a.value is not arg]
    results += [v for _, v in updated]
    tracer.block.add_op(func.ReturnOp(*results))
    function = func.FuncOp(
        name or fn.__name__,
        ([a.type for a in tracer.block.args], [r.type for r in results]),
        Region(tracer.block),
    )
    if isinstance(out, (tuple, list)):
        function.attributes[tta.RETURNS_TUPLE] = UnitAttr()
    if updated:  # inputs assigned into: each trailing result is written back to its input (in place)
        function.attributes[tta.UPDATES] = DenseArrayBase.from_list(i64, [i for i, _ in updated])
    module = ModuleOp([function])
    try:  # every op was verified when traced (Tracer.emit): check the function and its return only
        module.verify(verify_nested_ops=False)
        function.verify(verify_nested_ops=False)
        tracer.block.last_op.verify()
    except VerifyException as e:  # a tracer bug, not a user error: keep the IR in the message
        raise CompilationError(f"internal error: traced IR does not verify: {e}\n{module}") from e
    return module
