"""`TINYTON_PROFILE=1` prints where compile time went, stage by stage; unset, it prints nothing."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton import profiling
from tinyton.frontend.programs import compile_array_program


def _rmsnorm(x, w):
    return x * tt.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def _compile(cols: int) -> None:
    args = [np.ones((4, cols), np.float32), np.ones(cols, np.float32)]
    compile_array_program(tt.jit(_rmsnorm), args)


def test_profile_prints_the_stages_as_a_tree(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("TINYTON_PROFILE", "1")
    _compile(48)
    lines = capsys.readouterr().err.splitlines()
    names = [line.removeprefix("tinyton profile: ").rsplit(None, 2)[0] for line in lines]
    assert names[:3] == ["compile array program _rmsnorm", "  trace", "  fuse"]
    assert names[3:12] == ["    long sorts split into chunks", "    common subexpressions",
                           "    projections split into heads", "    attention spellings",
                           "    gathers of aranges as index checks", "    slices pushed to the arrays read", "    gathers pushed to the arrays read",
                           "    row scales behind matmuls", "    fusion patterns (PDL)"]
    assert "  generate kernels (tta.fusion -> tt)" in names
    assert all(line.endswith(" ms") for line in lines)


def test_profile_is_silent_by_default(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv("TINYTON_PROFILE", raising=False)
    _compile(40)
    assert "tinyton profile" not in capsys.readouterr().err
    monkeypatch.setenv("TINYTON_PROFILE", "0")
    assert not profiling.enabled()


def test_stages_nest(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("TINYTON_PROFILE", "1")
    with profiling.stage("outer"):
        with profiling.stage("inner"):
            pass
        with profiling.stage("second"):
            pass
    err = capsys.readouterr().err.splitlines()
    assert [line.split()[2:-2] for line in err] == [["outer"], ["inner"], ["second"]]
    assert [len(line) - len(line.lstrip()) for line in (e.removeprefix("tinyton profile: ") for e in err)] == [0, 2, 2]
