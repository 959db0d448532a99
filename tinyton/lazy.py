"""Start-up time: what `import tinyton` does not need loads on first use (issue 10: import <= 0.25 s).

xDSL, the dialects, the frontend's code generator and the compiler are needed only once something is
traced or compiled, yet the language's modules (builtins, `@tt.jit`, `tt.float32`) are what every user
imports. A module on that light path names such a dependency at module level, beside its imports, as
`values = lazy_module("tinyton.frontend.values")` and reads `values.Tile` where it runs; the module body
executes on that first attribute access (a `DeferredModule`), after which it is an ordinary module.
This is the project's way to defer the import of a module, and only for start-up time (never to dodge a cycle);
a package, which `lazy_module` does not take (below), or a module of a package too heavy to import yet (it
imports the parent at once), is imported inside the function that first needs it (tinyton/passes.py,
tinyton/compiler/kernel.py). tests/test_layering.py counts both as imports, tests/test_import_time.py checks
that `import tinyton` leaves xDSL and NumPy unloaded. The few names that must stay plain attributes
(`tt.tensor_descriptor`, `tt.DeviceArray` and the runtime's other classes, the xDSL- and NumPy-keyed tables
of tinyton/dtypes.py) are served by their module's PEP 562 `__getattr__`, through modules loaded this way.
importlib's own `LazyLoader` is not used: before Python 3.13 (gh-114763) it turns the module plain before
running its body, so a second thread's first call could read a half-run module (an AttributeError); a
`DeferredModule` runs the body under a lock and turns plain after it.

`lazy_module` takes plain modules only, never a package: while a lazy package sits unexecuted,
`import pkg.sub` reads `pkg.__path__`, which runs the package body (importing `pkg.sub`), and then the import
system, having looked in sys.modules before that, runs `pkg.sub` a second time into a new module object
(`lazy_module("numpy")` then `import numpy._core.multiarray`, as torch and NumPy's test suite do, leaves
`numpy._core` without its `_multiarray_umath`; a lazy `tinyton.compiler` then `from tinyton.compiler.kernel
import CompiledKernel` gave a second `CompiledKernel` class). A package on the light path is kept cheap to
import instead (tinyton/compiler/__init__.py serves its names from lazily loaded modules), and NumPy stays
off that path by construction: the modules that need it (tinyton/numpy_dtypes.py, the runtime's arrays and
launches) are the ones loaded lazily, and tests/test_import_time.py checks that `import tinyton` leaves it out of
sys.modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

_BODIES = threading.RLock()
"""Held while a deferred module's body runs: another thread's first access waits for the whole body; the running
thread's own accesses (the import machinery's, the body's) pass through."""
_running: set[str] = set()


class DeferredModule(ModuleType):
    """A module whose body has not run yet: the first attribute access runs it, then it is a plain module."""

    def __getattribute__(self, attr: str) -> Any:
        if type(self) is DeferredModule:
            _run_body(self)
        return ModuleType.__getattribute__(self, attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        """The body first: set before it, `program.matmul_tiles = f` would be undone by the body's own import."""
        if type(self) is DeferredModule:
            _run_body(self)
        ModuleType.__setattr__(self, attr, value)

    def __delattr__(self, attr: str) -> None:
        if type(self) is DeferredModule:
            _run_body(self)
        ModuleType.__delattr__(self, attr)


def _run_body(module: DeferredModule) -> None:
    name = ModuleType.__getattribute__(module, "__name__")
    with _BODIES:
        if type(module) is not DeferredModule or name in _running:
            return  # another thread ran it meanwhile, or this thread is running it now
        _running.add(name)
        try:
            ModuleType.__getattribute__(module, "__spec__").loader.exec_module(module)
            module.__class__ = ModuleType
        finally:
            _running.discard(name)


def lazy_module(name: str) -> ModuleType:
    """The plain module `name`, its body run on first attribute access (now, if it is already imported).
    Its parent package is imported now: lazy-load modules of cheap packages only."""
    parent, _, child = name.rpartition(".")
    if parent:
        importlib.import_module(parent)  # first: its body may import `name`, or lazily load it
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    if spec.submodule_search_locations is not None:
        raise ValueError(f"lazy_module({name!r}): a package, whose submodules could run twice (see tinyton/lazy.py)")
    module = importlib.util.module_from_spec(spec)
    module.__class__ = DeferredModule
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)  # as `import a.b` binds `a.b`
    return module
