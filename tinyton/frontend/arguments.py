"""Launch arguments: what a kernel is specialised on, and the parameter value each argument passes.

The launch fast path handles a call with generated functions per kernel and *call shape* (the types of
the positional arguments and the names and types of the keyword ones), built by `classifier`. In one
Python frame they check the types and compute the plan key (everything specialisation depends on, per
parameter in order: dtypes, 16-byte alignment of addresses, ints mod 16 and whether they are 1, a host
descriptor's `specialisation` of its sizes and strides, constexpr values and types) and the runtime
parameter values for the driver's buffer (device addresses, numbers); `launch` also finds the plan and
launches it (measured: docs/benchmarks-history.md, branch `host3`). Each argument kind is one row of `KINDS`; the
slow path (`argument_type`) derives the kernel parameter type.

A host `TensorDescriptor` is one argument and several kernel parameters (`DescriptorArg`): its base
pointer, then its shape and strides as i32, each specialised like an int argument (a last stride of 1,
which TMA and Triton require, makes its blocks contiguous rows); `runtime_values` spreads it, and so does the
fast path (`descriptor_values`) when its base is device memory: the slow path costs ~100 µs of host time per
launch, which a short kernel (a 2048³ matmul, ~40 µs) cannot hide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import i1, i32, i64
from xdsl.ir import Attribute

from tinyton.dialects.tt import PointerType
from tinyton.dtypes import DTYPES, dtype_of
from tinyton.errors import CompilationError
from tinyton.frontend import specialisation
from tinyton.frontend.block_pointers import DescriptorArg
from tinyton.frontend.source import Param
from tinyton.frontend.values import f32
from tinyton.runtime.arrays import DeviceArray
from tinyton.runtime.descriptors import TensorDescriptor
from tinyton.runtime.streams import explicit_stream, torch_raw_stream, torch_stream
from tinyton.runtime.torch_interop import host_view, is_torch

KINDS: dict[str, tuple[str, str]] = {
    "constexpr": ("{a}, type({a})", "None"),
    "bool": ("'i1'", "int({a})"),
    "int": (
        (
            "('1' if {a} == 1 else {a} & 15) if -0x80000000 <= {a} <= 0x7FFFFFFF"
            " else ('i64', {a} & 15) if -(1 << 63) <= {a} < (1 << 63) else None"
        ),
        "{a}",
    ),
    "float": ("'f32'", "{a}"),
    "device": ("{a}.dtype, {a}.device_ordinal, ({a}_p := {a}.ptr) & 15", "{a}_p"),
    "torch": ("{a}.dtype, ({a}_d := {a}.get_device()), ({a}_p := {a}.data_ptr()) & 15", "{a}_p if {a}_d >= 0 else None"),
    "cuda": ("{a}.__cuda_array_interface__['typestr'], address({a}) & 15", "address({a})"),
    "host": ("'host', str(getattr({a}, 'dtype', None)), address({a}) & 15", "None"),
    "descriptor": (
        (
            "'desc', {a}.base.dtype, tuple({a}.block_shape), {a}.padding, tuple(map(of_int, (*{a}.shape, *{a}.strides))),"
            " ({a}_v := descriptor_values({a}))[0] is None,"
            " (address({a}.base) if {a}_v[0] is None else {a}_v[0]) & 15"
        ),
        "*{a}_v",
    ),
}
"""Argument kind -> (plan-key items, parameter value or None when the runtime must stage it), as Python
expressions of the argument `{a}` (the key is evaluated first: `{a}_p` reuses the address it read). Each kind
gives a fixed number of items, so one call shape's keys are flat tuples (no inner tuples to build and hash),
led by the call shape's own token. A None item (an int out of range) never matches a cached plan; a CPU
tensor's value is None, so its plan is never fast and its host address is never launched (the slow path
stages it). A descriptor's value spreads into its parameters (`descriptor_values`), its key says whether
its base is None there (host memory: never fast, as a CPU tensor). A torch tensor's device is read as
`get_device()` (-1 on the CPU), its cheapest accessor (measured: docs/benchmarks-history.md, branch `host4`); with a
DeviceArray's `device_ordinal` it keys the plan, whose launch belongs to that device."""


def address(arg: Any) -> int:
    """The data address of an array argument (0 when it has none)."""
    if isinstance(arg, np.ndarray):
        return arg.ctypes.data
    if hasattr(arg, "data_ptr"):
        return arg.data_ptr()
    if hasattr(arg, "__cuda_array_interface__"):
        return arg.__cuda_array_interface__["data"][0]
    return 0


def runtime_values(values: Sequence[Any]) -> list[Any]:
    """The kernel's parameter values of runtime arguments: a descriptor spreads into its base, shape and
    strides (each int checked to fit i32)."""
    spread: list[Any] = []
    for v in values:
        if not isinstance(v, TensorDescriptor):
            spread.append(v)
            continue
        ints = _descriptor_ints(v)
        if not _fit_i32(ints):
            raise CompilationError(f"TensorDescriptor shape {v.shape} / strides {v.strides}: tinyton needs them to fit int32")
        spread += [v.base, *ints]
    return spread


def descriptor_values(desc: TensorDescriptor) -> tuple[Any, ...]:
    """A host descriptor's parameter values as the fast path passes them: its base's device address, then
    its shape and strides. The address is None where the slow path must launch instead: a base in host
    memory (staged there) or an int beyond i32 (refused there)."""
    ints = _descriptor_ints(desc)
    return (device_address(desc.base) if _fit_i32(ints) else None, *ints)


def device_address(arg: Any) -> int | None:
    """The address of device memory (a `DeviceArray`, a CUDA torch tensor, a `__cuda_array_interface__`
    object), None for anything else."""
    kind = kind_of(type(arg))
    if kind == "device":
        return arg.ptr
    if kind == "torch":
        return arg.data_ptr() if arg.get_device() >= 0 else None
    return address(arg) if kind == "cuda" else None


def _descriptor_ints(desc: TensorDescriptor) -> list[int]:
    return [int(n) for n in (*desc.shape, *desc.strides)]


def _fit_i32(ints: Sequence[int]) -> bool:
    return all(-(1 << 31) <= n < (1 << 31) for n in ints)


def kind_of(cls: type) -> str:
    if issubclass(cls, TensorDescriptor):
        return "descriptor"
    if issubclass(cls, (bool, np.bool_)):
        return "bool"
    if issubclass(cls, (int, np.integer)):
        return "int"
    if issubclass(cls, (float, np.floating)):
        return "float"
    if issubclass(cls, DeviceArray):
        return "device"
    if cls.__module__.partition(".")[0] == "torch" and hasattr(cls, "data_ptr"):
        return "torch"
    if not issubclass(cls, np.ndarray) and hasattr(cls, "__cuda_array_interface__"):
        return "cuda"
    return "host"


@dataclass(frozen=True)
class CallShape:
    """The generated functions of one call shape."""

    classify: Callable[[tuple, dict], tuple[tuple, tuple] | None]
    """`classify(args, kwargs) -> (plan key, runtime parameter values)`; for a call of another shape None,
    KeyError or ValueError."""
    launch: Callable[..., Any]
    """`launch(grid, *args, **kwargs)`: the launch fast path, what `kernel[grid]` binds the grid to. When the
    call has this shape and its key finds a fast plan whose globals are fresh, it launches and returns the
    plan's kernel; otherwise it returns `miss(grid, args, kwargs, launch)` having done nothing (its own
    classification never raises; the launch's errors propagate)."""


def classifier(
    params: Sequence[Param],
    arg_types: Sequence[type],
    kwarg_types: Mapping[str, type],
    options: Mapping[str, Any],
    plans: Mapping[tuple, Any] | None = None,
    miss: Callable[[tuple[int, int, int], tuple, dict, Callable[..., Any]], Any] | None = None,
) -> CallShape:
    """The functions of calls of this shape: positional arguments of `arg_types`, keyword arguments
    `kwarg_types`. Parameters left out take their defaults; the key ends with the launch `options` (names)
    given (those left out, like defaults, are fixed by the shape's token that leads the key). `plans`: plan
    key -> plan (`fast`, `reads.fresh()`, `bound`, `bind`, `kernel`), what `launch` looks keys up in; `miss`:
    what `launch` returns for calls it does not launch (default: None)."""
    namespace: dict[str, Any] = {
        "address": address, "of_int": specialisation.of_int, "descriptor_values": descriptor_values,
        "SHAPE": object(), "MISSING": object(),
        "PLANS": {} if plans is None else plans, "EXPLICIT": explicit_stream, "MISS": miss or _no_miss,
    }
    unpack = [f"    ({''.join(f'_a{i}, ' for i in range(len(arg_types)))}) = args"]
    sources = {p.name: (f"_a{i}", t) for i, (p, t) in enumerate(zip(params, arg_types))}
    for i, (name, t) in enumerate(kwarg_types.items()):
        unpack.append(f"    _k{i} = kwargs.get({name!r}, MISSING)")
        sources[name] = (f"_k{i}", t)
    checks, keys, values, kinds = [f"len(kwargs) == {len(kwarg_types)}"], ["SHAPE"], [], set()
    for p in params:
        a, t = sources.get(p.name, (f"D_{p.name}", type(p.default)))
        namespace.setdefault(a, p.default)
        kind = "constexpr" if p.constexpr else kind_of(t)
        if kind != "constexpr" and p.name in sources:
            namespace[f"T_{a}"] = t
            checks.append(f"type({a}) is T_{a}")
        if p.name in sources:  # a default's key items are the same in every call of this shape
            keys.append(KINDS[kind][0].format(a=a))
        if not p.constexpr:
            values.append(KINDS[kind][1].format(a=a))
            kinds.add(kind)
    keys += [KINDS["constexpr"][0].format(a=sources[name][0]) for name in options if name in sources]
    key, value = f"({', '.join(keys)},)", f"({''.join(f'{v}, ' for v in values)})"
    first_torch = next((sources[p.name][0] for p in params if p.name in sources and not p.constexpr
                        and kind_of(sources[p.name][1]) == "torch"), None)  # fmt: skip
    if first_torch is not None:  # torch tensors: launches follow torch's current stream of their device
        namespace["TORCH_STREAM"] = torch_raw_stream()
    default_stream = f"TORCH_STREAM({first_torch}_d)" if first_torch is not None else "0"
    if "descriptor" in kinds and "torch" not in kinds:  # a descriptor's base may be a torch tensor (in its plan's key)
        namespace["CURRENT_TORCH_STREAM"] = torch_stream
        default_stream = "(CURRENT_TORCH_STREAM() if plan.torch_inputs else 0)"
    classify = [*unpack, f"    if {' and '.join(checks)}:", f"        return {key}, {value}"]
    positional = "".join(f"_a{i}, " for i in range(len(arg_types)))
    launch = [  # positional-only parameters: no tuple to build and unpack, no name shared with a keyword
        f"    if not rest{f' and _a{len(arg_types) - 1} is not MISSING' if arg_types else ''}:",
        *("    " + line for line in unpack[1:]),
        f"        if {' and '.join(checks)}:",
        "            try:",
        f"                plan = PLANS[{key}]",
        "                hit = plan.fast and plan.reads.fresh()",
        "            except (KeyError, TypeError, ValueError):  # no plan, an unhashable constexpr, an emptied cell",
        "                hit = False",
        "            if hit:",
        "                s = EXPLICIT()",
        f"                (plan.bound.get(grid) or plan.bind(grid))({default_stream} if s is None else s, {value})",
        "                return plan.kernel",
        f"    return MISS(grid, (*[a for a in ({positional}) if a is not MISSING], *rest), kwargs, launch)",
    ]
    signature = f"def launch(grid, {''.join(f'_a{i}=MISSING, ' for i in range(len(arg_types)))}/, *rest, **kwargs):"
    source = "def classify(args, kwargs):\n" + "\n".join(classify) + f"\n\n{signature}\n" + "\n".join(launch)
    exec(source, namespace)  # noqa: S102 - from KINDS and numbered names only
    return CallShape(namespace["classify"], namespace["launch"])


def _no_miss(grid: tuple[int, int, int], args: tuple, kwargs: dict, launch: Callable[..., Any]) -> None:
    """A fast path's miss without a slow path to take (classifiers made for reading their keys)."""


def argument_type(arg: Any, specialise: bool = True) -> tuple[Attribute | DescriptorArg, str]:
    """(kernel parameter type, `specialisation` of its value, NONE unless `specialise`) of a runtime
    argument; CompilationError (no location) if none."""
    kind = kind_of(type(arg))
    if kind == "descriptor":
        pointer, spec = argument_type(arg.base, specialise)
        ints = tuple(specialisation.of_int(int(n)) if specialise else specialisation.NONE for n in (*arg.shape, *arg.strides))
        return DescriptorArg(pointer, tuple(int(b) for b in arg.block_shape), arg.padding, (spec, *ints)), spec
    if kind == "bool":
        return i1, specialisation.NONE
    if kind == "int":
        if not -(1 << 63) <= int(arg) < (1 << 63):
            raise CompilationError(f"the int {arg} does not fit in int64")
        wide = not -(1 << 31) <= int(arg) < (1 << 31)  # as Triton: ints beyond int32 are passed as int64
        return i64 if wide else i32, specialisation.of_int(int(arg)) if specialise else specialisation.NONE
    if kind == "float":
        return f32, specialisation.NONE
    dtype = getattr(arg, "dtype", None)
    if dtype is None and kind == "cuda":
        dtype = np.dtype(arg.__cuda_array_interface__["typestr"])
    if dtype is None:
        raise CompilationError(
            f"unsupported argument of type {type(arg).__name__}; pass arrays (NumPy, torch, tinyton "
            "DeviceArray) or Python numbers"
        )
    try:
        element = dtype_of(dtype)
    except CompilationError:
        raise CompilationError(
            f"arrays of {dtype} are not supported; kernels take arrays of {', '.join(d.name for d in DTYPES)}"
        ) from None
    return PointerType(element.ir), specialisation.of_address(address(arg)) if specialise else specialisation.NONE


def simulator_argument(arg: Any) -> Any:
    """What the simulator takes for an argument: host memory as NumPy arrays, bools as ints."""
    if isinstance(arg, (bool, np.bool_)):
        return int(arg)
    if kind_of(type(arg)) in ("device", "cuda"):
        raise CompilationError("device arrays cannot run on the simulator; pass NumPy arrays or CPU tensors")
    if is_torch(arg):
        return host_view(arg)  # a CPU torch tensor: a view of its memory
    return arg
