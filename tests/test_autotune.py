"""How the `Tuner` measures and decides (tinyton/compiler/autotune.py), with stand-in timers: candidates
prepared once and timed in interleaved rounds, the finalists (fastest two and the default) re-timed, the
medians deciding, the default kept unless beaten by the margin, failures losing, the choice kept on disk
per key. No timing here: the timers return scripted milliseconds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tinyton.compiler.autotune import (
    FINAL_ROUNDS,
    MARGIN,
    ROUNDS,
    Tuner,
    TuningFault,
    agrees,
    decide,
    measure,
)
from tinyton.runtime import driver
from tinyton.runtime.cache import KernelCache
from tinyton.runtime.driver import CudaError


def scripted(times: dict[str, list[float]], log: list[str]):
    """A `prepare` whose timers return `times[c]` in turn (cycling) and log which candidate ran."""

    def prepare(c: str):
        values = itertools.cycle(times[c])
        return lambda: log.append(c) or next(values)

    return prepare


def test_rounds_interleave_and_the_finalists_are_retimed():
    log: list[str] = []
    times = {"a": [2.0], "b": [1.0], "c": [3.0], "d": [1.5]}
    result = measure(list(times), scripted(times, log), default="c")
    assert log[:4] == ["a", "b", "c", "d"] and log[4:8] == ["b", "c", "d", "a"], "each round starts one later"
    finals = log[4 * ROUNDS:]
    assert sorted(set(finals)) == ["b", "c", "d"], "the fastest two and the default"
    assert len(finals) == 3 * FINAL_ROUNDS and "a" not in finals
    assert result.choice == 1 and result.median(1) == 1.0


def test_medians_ignore_one_slow_window():
    """A window hit by a clock drop (one in three here) does not decide, as a mean or one window would."""
    times = {"default": [1.00], "other": [0.90, 0.91, 5.0]}
    assert measure(list(times), scripted(times, []), default="default").choice == 1
    times = {"default": [1.00, 1.0, 9.0], "other": [0.995]}
    assert measure(list(times), scripted(times, []), default="default").choice == 0, "within the margin"


def test_the_default_keeps_its_place_within_the_margin():
    assert decide([[1.0], [1.0 / (1 + MARGIN / 2)]], default=0) == 0
    assert decide([[1.0], [1.0 / (1 + 2 * MARGIN)]], default=0) == 1
    assert decide([[1.0], [0.5]], default=None) == 1
    assert decide([[3.0], [], [2.0]], default=None) == 2, "no samples: it failed"


def test_failures_lose_and_the_others_still_decide():
    def prepare(c: str):
        if c == "no compile":
            raise RuntimeError("ptxas: too many resources")
        if c == "no launch":
            def fails() -> float:
                raise RuntimeError("launch out of resources")
            return fails
        return lambda: {"slow": 2.0, "fast": 1.0}[c]

    result = measure(["slow", "no compile", "no launch", "fast"], prepare, default="slow")
    assert result.choice == 3 and result.samples[1] == result.samples[2] == []


def _fault(name: str) -> CudaError:
    """A driver error as the GPU reports it, without a GPU (the name is what the tuner reads)."""
    error = CudaError.__new__(CudaError)
    RuntimeError.__init__(error, f"cuEventSynchronize failed: {name}")
    error.call, error.code, error.name = "cuEventSynchronize", 700, name
    return error


@pytest.mark.parametrize("where", ["compile", "run"])
def test_a_candidate_that_faults_the_gpu_stops_the_tuning_by_name(tmp_path, where):
    """A fault (an illegal address) leaves the CUDA context unusable: the tuner cannot drop the candidate and go on,
    as it does when one cannot compile or launch; it says which candidate it was, not a later call's
    `cuModuleLoadData failed` (what a scalar passed by value did on the H200, 2026-12-03)."""
    def prepare(c: str):
        if c == "wrong" and where == "compile":
            raise _fault("CUDA_ERROR_ILLEGAL_ADDRESS")

        def run() -> float:
            if c == "wrong":
                raise _fault("CUDA_ERROR_MISALIGNED_ADDRESS")
            return 1.0
        return run

    tuner = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path, disk=False))
    with pytest.raises(TuningFault, match=r"tuning test \('H200', 7\): the candidate wrong faulted on the GPU .*TINYTON_TUNE=0"):
        tuner.choose(("H200", 7), ["right", "wrong"], prepare, default="right")
    assert not driver.faulted(RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")) and driver.faulted(_fault("CUDA_ERROR_ASSERT"))


def test_the_choice_is_kept_per_key_on_disk(tmp_path, capsys):
    times = {"w4": [1.0], "w8": [0.5]}
    log: list[str] = []
    tuner = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path, disk=True))
    assert tuner.choose(("H100", "float32", (8192, 1024)), list(times), scripted(times, log), default="w4") == "w8"
    assert "default 1000.0 µs" in capsys.readouterr().err, "the print says what the choice gained"
    count = len(log)
    fresh = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path, disk=True))  # a later process
    assert fresh.choose(("H100", "float32", (8192, 1024)), list(times), scripted(times, log), default="w4") == "w8"
    assert len(log) == count, "read from the disk cache"
    fresh.choose(("H200", "float32", (8192, 1024)), list(times), scripted(times, log), default="w4")
    assert len(log) > count, "another GPU measures again"


def test_a_stored_choice_no_longer_among_the_candidates_is_measured_again(tmp_path):
    times = {"gone": [0.5], "only": [1.0]}
    log: list[str] = []
    tuner = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path, disk=True))
    assert tuner.choose("key", ["gone", "only"], scripted(times, log)) == "gone"
    log.clear()
    assert tuner.choose("key", ["only"], scripted(times, log)) == "only" and log


def test_the_log_lists_every_candidate_fastest_first(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TINYTON_TUNE_LOG", "1")
    times = {"slow": [2.0], "fast": [0.5], "broken": [1.0]}

    def prepare(c: str):
        if c == "broken":
            raise RuntimeError("out of resources")
        return lambda: times[c][0]

    tuner = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path, disk=True))
    assert tuner.choose("key", list(times), prepare, default="slow") == "fast"
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tinyton:   ")]
    assert [line.split()[-1] for line in lines] == ["fast", "slow", "broken"]
    assert "500.0 µs" in lines[0] and "failed" in lines[2]


class _Computing:
    """A stand-in timer whose candidate also computes results (as tuning_runs' timers do)."""

    def __init__(self, ms: float, results: list[np.ndarray]):
        self.ms, self._results = ms, results

    def __call__(self) -> float:
        return self.ms

    def results(self) -> list[np.ndarray]:
        return self._results


def test_a_candidate_computing_other_results_is_not_used(tmp_path, capsys):
    """The fastest candidate's results differ from the default's in whole values: it is rejected, the tuner
    says so, and the next fastest wins; rounding differences (another summation order) are agreement."""
    good = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    timers = {"default": _Computing(3.0, [good]), "fast but wrong": _Computing(1.0, [good * 0.5]),
              "rounded": _Computing(2.0, [good * (1 + 1e-3)])}
    tuner = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path))
    assert tuner.choose(("k",), list(timers), timers.__getitem__, default="default") == "rounded"
    assert "fast but wrong computed other results than the reference candidate" in capsys.readouterr().err
    assert agrees([good], [good + 0.1]) is None and agrees([np.array([1, 2])], [np.array([1, 3])]) is not None
    assert agrees([np.array([np.nan, 1.0])], [np.array([np.nan, 1.0])]) is None


def test_a_candidate_faulting_while_its_results_are_compared_is_named(tmp_path):
    class Faulting(_Computing):
        def results(self) -> list[np.ndarray]:
            raise _fault("CUDA_ERROR_ILLEGAL_ADDRESS")

    good = np.ones((4, 4), np.float32)
    timers = {"default": _Computing(2.0, [good]), "fast": Faulting(1.0, [good])}
    tuner = Tuner("test", encode=str, decode=str, cache=KernelCache(tmp_path, disk=False))
    with pytest.raises(TuningFault, match="the candidate fast faulted on the GPU"):
        tuner.choose(("k",), list(timers), timers.__getitem__, default="default")


def test_a_program_that_accumulates_into_its_results_is_not_compared():
    """A reference whose results change from run to run (atomics into an output) decides nothing."""
    runs = itertools.count()

    class Accumulating(_Computing):
        def results(self) -> list[np.ndarray]:
            return [np.full(4, float(next(runs)))]

    timers = {"default": Accumulating(3.0, []), "other": _Computing(1.0, [np.zeros(4)])}
    assert measure(list(timers), timers.__getitem__, default="default").choice == 1
