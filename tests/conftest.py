"""Shared pytest setup: tests marked `gpu` are skipped, with the reason, without a GPU; tests marked `isolated`
run in a process of their own, under a time limit.

A GPU kernel that traps leaves its process's CUDA context unusable, and one that hangs (a warp-specialised
kernel's mbarrier wait whose phase never completes) stops the whole run: an `isolated` test re-runs itself in a child
pytest (its node id, `TINYTON_ISOLATED` set there), and fails with the child's output, or after ISOLATED_SECONDS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from tinyton.compiler import program as compiler_program
from tinyton.frontend import programs
from tinyton.runtime import driver

ISOLATED_ENV = "TINYTON_ISOLATED"
ISOLATED_SECONDS = 300
_BACKEND = driver.backend
"""The cached resolver (fixtures below monkeypatch `driver.backend` itself)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    from tinyton.runtime import driver

    if driver.is_available():
        return
    skip = pytest.mark.skip(reason=f"no usable CUDA GPU: {driver.unavailable_reason()}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker("isolated") is None or os.environ.get(ISOLATED_ENV):
        return None
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid]
    try:
        child = subprocess.run(command, cwd=Path(pyfuncitem.config.rootpath), env={**os.environ, ISOLATED_ENV: "1"},
                               capture_output=True, text=True, timeout=ISOLATED_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{pyfuncitem.nodeid} did not end in {ISOLATED_SECONDS} s in its own process (a hang)")
    if child.returncode != 0:
        pytest.fail(f"{pyfuncitem.nodeid} failed in its own process:\n{(child.stdout + child.stderr)[-4000:]}")
    return True


@pytest.fixture(autouse=True)
def backend_of_this_test():
    """`driver.backend()` is resolved once per process (cached), and many tests pick theirs by monkeypatching
    `TINYTON_BACKEND`: without resolving it again per test, the first such test of a worker decided for all the
    later ones (a `cuda` case silently on the simulator, or `driver.backend() == "cuda"` checks failing on a GPU
    host after a `sim` case)."""
    _BACKEND.cache_clear()
    yield
    _BACKEND.cache_clear()


@pytest.fixture
def attention_blocks(monkeypatch):
    """`attention_blocks(Blocks(...))`: every attention compiled from then on takes those blocks instead of the
    tuner's or the default (no array program compiled before is reused)."""

    def use(chosen) -> None:
        monkeypatch.setattr(compiler_program, "attention_blocks", lambda problem: chosen)
        monkeypatch.setattr(programs, "_PROGRAMS", weakref.WeakKeyDictionary())

    return use


@pytest.fixture
def simulator(monkeypatch):
    """Array programs run on the NumPy simulator, whatever the machine has."""
    monkeypatch.setattr(driver, "backend", lambda: "sim")


@pytest.fixture
def gpu(monkeypatch):
    """Array programs run on the GPU (for tests marked `gpu`, which are skipped without one)."""
    monkeypatch.setattr(driver, "backend", lambda: "cuda")
