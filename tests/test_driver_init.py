"""The driver's start-up: a first compile overlaps `cuInit` with its own work (`driver.start_initialising`), and a
compile to PTX reads the device's attributes without making a context (the first allocation, module load or launch
makes it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tinyton.runtime import driver


@pytest.fixture
def fresh_driver(monkeypatch):
    """The driver as a new process has it: not initialised, nothing known about it."""
    for name in ("_initialising", "_driver_state", "_unavailable"):
        monkeypatch.setattr(driver, name, None)


def test_initialising_starts_once(fresh_driver, monkeypatch):
    calls = []
    monkeypatch.setattr(driver, "_init_driver_library", lambda: calls.append("cuInit"))
    driver.start_initialising()
    driver.start_initialising()
    driver._initialising.join()
    assert calls == ["cuInit"]


def test_no_thread_once_the_driver_is_known_absent(fresh_driver, monkeypatch):
    monkeypatch.setattr(driver, "_unavailable", "OSError: libcuda.so.1: cannot open shared object file")
    driver.start_initialising()
    assert driver._initialising is None


def test_without_a_driver_library_the_thread_ends_quietly(monkeypatch):
    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(driver.ctypes, "CDLL", missing)
    driver._init_driver_library()


@pytest.mark.gpu
@pytest.mark.skipif(not driver.is_available(), reason="needs a CUDA GPU")
def test_a_compile_to_ptx_makes_no_context(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        import tinyton as tt
        from tinyton.frontend.programs import compile_array_program
        from tinyton.runtime import driver

        @tt.jit
        def rmsnorm(x, w):
            return x * tt.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

        program = compile_array_program(rmsnorm, [np.ones((32, 2048), np.float32), np.ones(2048, np.float32)])
        assert all(k.asm["ptx"] for k in program.kernels())
        assert not driver._contexts, "a compile made a context"
        assert (rmsnorm(np.ones((4, 64), np.float32), np.ones(64, np.float32)) > 0).all()
        assert driver._contexts
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False,
                          env={**os.environ, "TINYTON_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
