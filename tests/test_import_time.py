"""`import tinyton` stays light (issue 10: <= 0.25 s): NumPy, xDSL, the dialects and the compiler load on
first use (tinyton/lazy.py). Each check runs in a fresh interpreter, since this one has long imported everything."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import threading
import types
from pathlib import Path

import pytest

from tinyton.lazy import lazy_module

FOREIGN = ("numpy", "ml_dtypes", "networkx", "xdsl", "torch", "cuda")
"""Packages that importing tinyton and defining kernels leave out of sys.modules altogether (not even lazily
loaded: a lazily loaded package can run a submodule twice, tinyton/lazy.py). NumPy alone takes a quarter
of a second on the GPU hosts."""
COMPILER = ("tinyton.dialects", "tinyton.lowering", "tinyton.rewrites", "tinyton.compiler.")
"""tinyton's own heavy modules (the compiler's package itself is light): lazily loaded ones may sit in
sys.modules, unexecuted."""

DEFINITIONS = """
    import tinyton as tt
    import tinyton.language as tl
    from tinyton import jit

    @jit
    def add_one(x):
        return x + 1

    @tt.jit
    def copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))

    @tt.graphed
    def step(x):
        return add_one(x)

    tuned = tt.autotune(configs=[tt.Config({"BLOCK": 64})], key=[])(copy)
    assert tt.float32.is_floating() and tt.int1.is_int_signed() and tt.uint8.is_int_unsigned()
    assert tt.float16.primitive_bitwidth == tt.bfloat16.primitive_bitwidth == 16 and tt.bfloat16.is_floating()
    assert tt.MAX_TILE_ELEMENTS == 1 << 16
"""
"""A user's start: imports, an array program, a kernel, a graphed function, an autotuned kernel, dtypes."""


def _loaded_after(code: str) -> list[str]:
    """The heavy modules loaded after `code`: foreign ones present in sys.modules, tinyton's whose body ran (a
    lazily loaded module sits unexecuted in sys.modules until its first attribute access: a `DeferredModule`)."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import sys
        from tinyton.lazy import DeferredModule as lazy
        print(" ".join(sorted(n for n, m in list(sys.modules.items())
                              if n.partition(".")[0] in {FOREIGN!r}
                              or n.startswith({COMPILER!r}) and not isinstance(m, lazy))))
    """)
    with tempfile.TemporaryDirectory() as folder:  # a file: kernels compile from their source
        script = Path(folder) / "probe.py"
        script.write_text(probe)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_import_and_decorating_leave_numpy_and_xdsl_unloaded() -> None:
    assert _loaded_after(DEFINITIONS) == []


def test_calls_after_a_light_import_load_what_they_need() -> None:
    """The first call loads NumPy (and the compiler, or the simulator) and runs as usual."""
    loaded = _loaded_after(DEFINITIONS + """
    import numpy as np

    x = np.arange(64, dtype=np.float32)
    assert (add_one(x) == x + 1).all()
    y = np.zeros_like(x)
    copy[(1,)](x, y, BLOCK=64)
    assert (y == x).all()
    """)
    assert "numpy" in loaded and "ml_dtypes" in loaded


def test_lazy_names_load_on_first_use() -> None:
    loaded = _loaded_after("""
        import tinyton as tt
        from tinyton.dtypes import ELEMENT_TO_NUMPY, dtype_of
        assert tt.tensor_descriptor.__name__ == "TensorDescriptor"
        assert dtype_of(tt.float16.ir) is tt.float16 and ELEMENT_TO_NUMPY[tt.bfloat16.ir] == tt.bfloat16.np
    """)
    assert "xdsl" in loaded and "tinyton.dialects.tt" in loaded


def test_runtime_names_load_numpy_on_first_use() -> None:
    loaded = _loaded_after("""
        import tinyton as tt
        import tinyton.language as tl
        from tinyton.dtypes import BF16

        assert [tt.DeviceArray.__name__, tl.Stream.__name__, tt.CudaGraph.__name__] == ["DeviceArray", "Stream", "CudaGraph"]
        assert callable(tt.to_device) and callable(tt.set_allocator) and BF16.name == "bfloat16"
    """)
    assert "numpy" in loaded and "ml_dtypes" in loaded and "xdsl" not in loaded


def test_a_submodule_imported_before_its_package_is_used_runs_once() -> None:
    """`tinyton.compiler` is imported (light) by `@tt.jit`, its modules lazily: importing one of them
    directly first must not run it a second time (as a lazily loaded package would: tinyton/lazy.py)."""
    loaded = _loaded_after("""
        import sys
        import tinyton
        from tinyton.compiler.kernel import CompiledKernel
        import tinyton.compiler

        assert tinyton.compiler.CompiledKernel is CompiledKernel
        assert tinyton.compiler.kernel is sys.modules["tinyton.compiler.kernel"]
    """)
    assert "tinyton.compiler.kernel" in loaded and "tinyton.compiler.program" not in loaded


def test_lazy_module_refuses_packages() -> None:
    assert "wsgiref" not in sys.modules
    with pytest.raises(ValueError, match="a package"):
        lazy_module("wsgiref")


def test_threads_racing_on_a_first_access_both_see_the_whole_body(tmp_path, monkeypatch) -> None:
    """The body runs once, and a second thread's first access waits for all of it (importlib's LazyLoader
    before Python 3.13 handed it the half-run module: an AttributeError)."""
    runs = tmp_path / "runs.txt"
    (tmp_path / "slow_body.py").write_text(textwrap.dedent(f"""
        import time
        with open({str(runs)!r}, "a") as f:
            f.write("ran\\n")
        time.sleep(0.3)
        VALUE = 1
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_body", raising=False)
    module = lazy_module("slow_body")
    assert not runs.exists()
    seen: list[object] = []

    def first_access() -> None:
        try:
            seen.append(module.VALUE)
        except AttributeError as error:
            seen.append(error)

    threads = [threading.Thread(target=first_access) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [1, 1] and runs.read_text() == "ran\n"
    assert sys.modules["slow_body"] is module and type(module) is types.ModuleType
