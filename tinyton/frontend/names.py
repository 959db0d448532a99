"""The free names (closure variables, globals) a compiled kernel variant read, and whether it is current.

As in Triton, a kernel resolves the names it does not define when it compiles (source.Namespace reads them
live), not when it is decorated. Triton raises when a global a kernel used has changed since; here the
variant is compiled again. `Reads` records what one variant (and the `@tt.jit` functions it inlined) read;
its `fresh()` is a generated identity check (tens of ns per name) on the launch fast path, and `current()`
compares values on a miss, so rebinding a global to an equal value (`SCALE = 2.0` again) keeps the variant.
Array programs key their cache on the values of the global names their code mentions (`globals_key`).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from tinyton.frontend.source import Namespace, constexpr

MISSING = object()
"""The value of a name that is not defined (yet)."""


def _lookup(namespace: Namespace, name: str) -> Any:
    try:
        return namespace[name]
    except KeyError:
        return MISSING


def _content(value: Any) -> Any:
    """What a compiled kernel depends on: a `tt.constexpr` global's value (it can be changed in place)."""
    return value.value if isinstance(value, constexpr) else value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):  # arrays and other values without a plain ==: only identity counts
        return False


def _always() -> bool:
    return True


class Reads:
    """The free names one compiled variant read: (namespace, name) -> the value read."""

    def __init__(self) -> None:
        self.values: dict[tuple[int, str], tuple[Namespace, str, Any]] = {}
        self._contents: dict[tuple[int, str], Any] = {}  # what each value meant when read (a constexpr's value)
        self.fresh: Callable[[], bool] = _always
        """True when every name still holds the object it held (a False may still be `current()`)."""

    @property
    def names(self) -> set[str]:
        return {name for _, name, _ in self.values.values()}

    def read(self, namespace: Namespace, name: str) -> Any:
        """The value of `name` in `namespace` now, recorded; MISSING if it is not defined."""
        value = _lookup(namespace, name)
        key = (id(namespace), name)
        if value is not MISSING and key not in self.values:
            self.values[key], self._contents[key] = (namespace, name, value), _content(value)
            self._build()
        return value

    def current(self) -> bool:
        """Whether every name still holds an equal value; rebuilds `fresh` for the objects it holds now."""
        if self.fresh():
            return True
        now = {key: (ns, name, _lookup(ns, name)) for key, (ns, name, _) in self.values.items()}
        if not all(_same(_content(now[key][2]), c) for key, c in self._contents.items()):
            return False
        self.values = now
        self._build()
        return True

    def _build(self) -> None:
        env: dict[str, Any] = {"M": MISSING}
        terms = []
        for i, (namespace, name, value) in enumerate(self.values.values()):
            env[f"V{i}"] = value
            cell = namespace.cells.get(name)
            if cell is None:
                env[f"G{i}"] = namespace.globals.get
                terms.append(f"G{i}({name!r}, M) is V{i}")
            else:
                env[f"C{i}"] = cell
                terms.append(f"C{i}.cell_contents is V{i}")
            if isinstance(value, constexpr):
                env[f"W{i}"] = value.value
                terms.append(f"V{i}.value is W{i}")
        self.fresh = _identity_check(env, terms)


def _identity_check(env: dict[str, Any], terms: list[str]) -> Callable[[], bool]:
    """A generated `() -> bool`: the `and` of `terms`, with the names of `env` bound as locals (the fastest
    lookups)."""
    defaults = ", ".join(f"{k}={k}" for k in env)
    exec(f"def check({defaults}):\n    return {' and '.join(terms) or 'True'}", env)  # noqa: S102 - names only
    return env["check"]


_CODE_NAMES: dict[types.CodeType, tuple[str, ...]] = {}


def _free_names(code: types.CodeType) -> tuple[str, ...]:
    """Global and attribute names mentioned by `code` and the code nested in it (lambdas, comprehensions)."""
    names = _CODE_NAMES.get(code)
    if names is None:
        found = dict.fromkeys(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found.update(dict.fromkeys(_free_names(const)))
        names = _CODE_NAMES[code] = tuple(found)
    return names


def _value_key(value: Any) -> Any:
    value = _content(value)
    try:
        hash(value)
        return type(value), value
    except TypeError:  # an array or another mutable object: its identity (changing it in place is not seen)
        return type(value), id(value)


def globals_guard(fn: Callable[..., Any]) -> Callable[[], bool]:
    """A generated check that `globals_key(fn)` still holds what it holds now: every global name `fn`'s code
    mentions holds the same object (or is still undefined), every closure cell too, and a `tt.constexpr`
    its value. False (or ValueError, for an emptied cell) may still mean an equal key: a global rebound to
    an equal value."""
    g = fn.__globals__
    env: dict[str, Any] = {"M": MISSING, "G": g.get}
    terms = []
    values = [(f"G({name!r}, M)", g.get(name, MISSING)) for name in _free_names(fn.__code__)]
    for i, cell in enumerate(fn.__closure__ or ()):
        env[f"C{i}"] = cell
        try:
            values.append((f"C{i}.cell_contents", cell.cell_contents))
        except ValueError:  # empty: the check raises ValueError until it is filled
            values.append((f"C{i}.cell_contents", MISSING))
    for i, (expression, value) in enumerate(values):
        env[f"V{i}"] = value
        terms.append(f"{expression} is V{i}")
        if isinstance(value, constexpr):
            env[f"W{i}"] = value.value
            terms.append(f"V{i}.value is W{i}")
    return _identity_check(env, terms)


def globals_key(fn: Callable[..., Any]) -> tuple[Any, ...]:
    """The values of the globals and closure variables `fn` may read, for an array program's cache key."""
    g = fn.__globals__
    key = [_value_key(g.get(name, MISSING)) for name in _free_names(fn.__code__) if name in g]
    for cell in fn.__closure__ or ():
        try:
            key.append(_value_key(cell.cell_contents))
        except ValueError:
            key.append(MISSING)
    return tuple(key)
