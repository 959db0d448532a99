"""`import tinyton` stays light (issue 10: <= 0.25 s): xDSL, the dialects and the compiler load on first use
(tinyton/lazy.py). Each check runs in a fresh interpreter, since this one has long imported everything."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY = ("xdsl", "tinyton.dialects", "tinyton.lowering", "tinyton.rewrites", "torch")


def _loaded_after(code: str) -> list[str]:
    """The heavy modules whose body ran after `code` (a lazily loaded module sits unexecuted in
    sys.modules until its first attribute access: importlib's `_LazyModule`)."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import importlib.util, sys
        lazy = importlib.util._LazyModule
        print(" ".join(sorted(n for n, m in list(sys.modules.items())
                              if n.startswith({HEAVY!r}) and not isinstance(m, lazy))))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_import_and_decorating_leave_xdsl_unloaded() -> None:
    assert _loaded_after("""
        import tinyton as tt
        import tinyton.language as tl

        @tt.jit
        def add_one(x):
            return x + 1

        @tt.jit
        def copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs))

        tt.autotune(configs=[tt.Config({"BLOCK": 64})], key=[])(copy)
        assert tt.float32.is_floating() and tt.int1.is_int_signed() and tt.uint8.is_int_unsigned()
        assert tt.MAX_TILE_ELEMENTS == 1 << 16
    """) == []


def test_lazy_names_load_on_first_use() -> None:
    loaded = _loaded_after("""
        import tinyton as tt
        from tinyton.dtypes import ELEMENT_TO_NUMPY, dtype_of
        assert tt.tensor_descriptor.__name__ == "TensorDescriptor"
        assert dtype_of(tt.float16.ir) is tt.float16 and ELEMENT_TO_NUMPY[tt.bfloat16.ir] == tt.bfloat16.np
    """)
    assert "xdsl" in loaded and "tinyton.dialects.tt" in loaded
