"""Pick the fastest of a few configurations by measuring them on the GPU, once per key, kept on disk.

Generic: a `Tuner` knows nothing of what it tunes; the caller gives the key (GPU, shape class, dtype...),
the candidates, the incumbent default and how to prepare one for timing (compile it, allocate its buffers:
tinyton/compiler/tuning_runs.py), which returns a timer of one short window (`do_bench` median, L2
flushed before each run). The winner is a JSON record of the disk cache (`KernelCache.put_record`, hashed
with the compiler's version), so later processes on the same GPU skip the measurement, and each measurement
prints what it cost. The array-program matmul tiles, attention blocks and row-kernel shapes use it
(tinyton/compiler/*_tuning.py); `TINYTON_TUNE=0` turns all three off (`tuning_enabled`), `TINYTON_TUNE_LOG=1`
prints every candidate's time.

How it measures (`measure`): a window of one candidate moves by 2-4 % with the GPU's clocks and whatever ran
just before, more than the gap between neighbouring shapes; one window each, taken right after each
compile, once let a 13 % slower row shape win on an H100. So every candidate is prepared first, then timed
in ROUNDS interleaved rounds (every candidate once a round, each round starting one later), the fastest
two and the default are timed FINAL_ROUNDS more times in turn, and the medians decide; the default keeps
its place unless a challenger is faster by MARGIN (`decide`). Before deciding, the finalists' results on the
tuning's inputs are compared with the default's (`agrees`): a candidate that computes other values (a tile
form the lowering gets wrong on this GPU) is not used, and the tuner says so, rather than the fastest wrong
kernel winning silently.
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from tinyton.runtime import driver
from tinyton.runtime.cache import KernelCache, cache_key, default_cache

C = TypeVar("C")
Timer = Callable[[], float]
"""Milliseconds of one short timing window of a prepared candidate."""

LOG_ENV = "TINYTON_TUNE_LOG"
"""Set (to anything but 0): each measurement also prints every candidate's median, fastest first, so one run
on a GPU shows how the forms compare and not only which won."""

ROUNDS = 3
FINAL_ROUNDS = 6
MARGIN = 0.02
"""A challenger replaces the default only when its median is this much faster: below the medians' spread
between processes, a choice that flips with the noise is worse than the default it displaces."""


@dataclass
class Measurement(Generic[C]):
    """Every window's milliseconds per candidate (empty: it failed to compile or run) and the choice."""

    candidates: Sequence[C]
    samples: list[list[float]]
    choice: int
    rejected: dict[int, str] = field(default_factory=dict)
    """Candidates whose results disagreed with the reference candidate's, and how."""

    def median(self, index: int) -> float:
        return _median(self.samples[index])


@dataclass
class Tuner(Generic[C]):
    """Chooses among `candidates` per key; `encode`/`decode` turn a choice into JSON and back."""

    name: str
    encode: Callable[[C], Any] = asdict
    decode: Callable[[Any], C] | None = None
    cache: KernelCache | None = None

    def choose(self, key: Hashable, candidates: Sequence[C], prepare: Callable[[C], Timer], default: C | None = None,
               ahead: Callable[[Sequence[C]], None] | None = None) -> C:
        """The stored choice for `key`, or the one `measure` picks (a candidate that fails to compile or
        run loses), stored for next time; `ahead`, when measuring, is given every candidate first (to compile
        them all at once: compiler/compile_pool.py)."""
        cache = self.cache or default_cache()
        record = hashlib.sha256(cache_key(repr(key), (), "", "").encode()).hexdigest()
        stored = cache.get_record(f"tune-{self.name}", record)
        if stored is not None:
            choice = self.decode(stored) if self.decode is not None else stored
            if choice in candidates:
                return choice
        start = time.perf_counter()
        if ahead is not None:
            ahead(candidates)
        try:
            result = measure(candidates, prepare, default)
        except _Fault as fault:
            raise TuningFault(
                f"tinyton: tuning {self.name} {key}: the candidate {candidates[fault.index]} faulted on the GPU "
                f"({fault.__cause__}), which leaves this process's CUDA context unusable. This is a compiler bug: "
                "please report it; TINYTON_TUNE=0 runs the default configurations without measuring."
            ) from fault.__cause__
        best = candidates[result.choice]
        cache.put_record(f"tune-{self.name}", record, self.encode(best))
        versus = f" ({result.median(result.choice) * 1e3:.1f} µs"
        versus += f", default {result.median(candidates.index(default)) * 1e3:.1f} µs)" if default in candidates else ")"
        print(f"tinyton: tuned {self.name} {key} over {len(candidates)} candidates in "
              f"{time.perf_counter() - start:.1f} s: {best}{versus}", file=sys.stderr)
        for i, how in result.rejected.items():
            print(f"tinyton: tuning {self.name} {key}: {candidates[i]} computed other results than the reference "
                  f"candidate ({how}); not used. This is a compiler bug: please report it.", file=sys.stderr)
        if os.environ.get(LOG_ENV, "0") not in ("", "0"):
            for i in sorted(range(len(candidates)), key=result.median):
                timed = f"{result.median(i) * 1e3:9.1f} µs" if result.samples[i] else "   failed   "
                print(f"tinyton:   {timed}  {candidates[i]}", file=sys.stderr)
        return best


class TuningFault(RuntimeError):
    """A candidate faulted on the GPU while it was measured (`driver.faulted`): the process cannot go on."""


class _Fault(Exception):
    """Candidate `index` faulted (the driver's error is the cause); `Tuner.choose` names it in a TuningFault."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def measure(candidates: Sequence[C], prepare: Callable[[C], Timer], default: C | None = None) -> Measurement[C]:
    """Prepare every candidate, time them in interleaved rounds, re-time the finalists, decide."""
    timers = [_prepared(prepare, c, i) for i, c in enumerate(candidates)]
    samples: list[list[float]] = [[] for _ in candidates]
    _rounds(timers, samples, list(range(len(candidates))), ROUNDS)
    medians = [_median(s) for s in samples]
    finalists = sorted(range(len(candidates)), key=medians.__getitem__)[:2]
    incumbent = candidates.index(default) if default in candidates else None
    if incumbent is not None and incumbent not in finalists:
        finalists.append(incumbent)
    _rounds(timers, samples, finalists, FINAL_ROUNDS)
    rejected = _disagreeing(timers, finalists, incumbent)
    for i in rejected:
        samples[i].clear()
    return Measurement(candidates, samples, decide(samples, incumbent if incumbent not in rejected else None), rejected)


RESULT_TOLERANCE = 0.05
"""Relative tolerance (of the results' largest magnitude) within which candidates agree: another tile or K split
sums in another order, so floats differ in their last bits; a wrong tile differs in whole values."""


def _disagreeing(timers: Sequence[Timer | None], finalists: Sequence[int], incumbent: int | None) -> dict[int, str]:
    """The finalists whose results (timers with a `results()`: tuning_runs) differ from the reference's (the
    incumbent's, else the first finalist's), with the largest difference; none when the reference's own results
    change from run to run (a program that accumulates into its outputs)."""
    ran = [i for i in finalists if timers[i] is not None and hasattr(timers[i], "results")]
    reference = incumbent if incumbent in ran else (ran[0] if ran else None)
    if reference is None:
        return {}
    current = reference
    try:
        expected = timers[reference].results()
        if agrees(timers[reference].results(), expected) is not None:
            return {}
        found = {}
        for current in ran:
            if current != reference and (how := agrees(timers[current].results(), expected)) is not None:
                found[current] = how
        return found
    except Exception as e:  # noqa: BLE001 - a comparison that cannot run decides nothing ...
        if driver.faulted(e):  # ... unless the candidate run took the CUDA context with it
            raise _Fault(current) from e
        return {}


def agrees(got: Sequence[Any], expected: Sequence[Any]) -> str | None:
    """None when each result matches the expected one (floats within RESULT_TOLERANCE of the largest finite
    magnitude, NaN where NaN; others exactly), else what differs."""
    for index, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            return f"result {index}: shape {g.shape}, expected {e.shape}"
        if e.dtype.kind in "fV":
            g64, e64 = g.astype(np.float64), e.astype(np.float64)
            finite = np.abs(e64[np.isfinite(e64)])
            scale = float(finite.max()) if finite.size else 1.0
            if not np.allclose(g64, e64, rtol=RESULT_TOLERANCE, atol=RESULT_TOLERANCE * scale, equal_nan=True):
                largest = float(np.nanmax(np.abs(g64 - e64)))
                return f"result {index}: largest difference {largest:.3g} at scale {scale:.3g}"
        elif not np.array_equal(g, e):
            return f"result {index}: {int(np.count_nonzero(g != e))} elements differ"
    return None


def decide(samples: Sequence[Sequence[float]], default: int | None, margin: float = MARGIN) -> int:
    """The index of the smallest median, or `default`'s when that is within `margin` of it."""
    medians = [_median(s) for s in samples]
    best = min(range(len(medians)), key=medians.__getitem__)
    if default is not None and medians[default] <= medians[best] * (1 + margin):
        return default
    return best


def _median(samples: Sequence[float]) -> float:
    """A candidate's median milliseconds; infinite when it has none (it failed to compile or run)."""
    return statistics.median(samples) if samples else math.inf


def tuning_enabled() -> bool:
    """Tuners measure: there is a GPU, and TINYTON_TUNE is not 0/false/off/no (the defaults without)."""
    value = os.environ.get("TINYTON_TUNE", "").strip().lower()
    return value not in ("0", "false", "off", "no") and driver.is_available()


def _rounds(timers: list[Timer | None], samples: list[list[float]], which: list[int], rounds: int) -> None:
    """`rounds` windows of each of `which`, in turn, each round starting one later; a candidate whose
    timer raises is dropped (its samples emptied)."""
    for r in range(rounds):
        for i in which[r % len(which):] + which[:r % len(which)]:
            timer = timers[i]
            if timer is None:
                continue
            try:
                samples[i].append(timer())
            except Exception as e:  # noqa: BLE001 - a configuration that cannot run (resources) loses
                if driver.faulted(e):  # ... unless it took the process's CUDA context with it
                    raise _Fault(i) from e
                timers[i] = None
                samples[i].clear()


def _prepared(prepare: Callable[[C], Timer], candidate: C, index: int) -> Timer | None:
    try:
        return prepare(candidate)
    except Exception as e:  # noqa: BLE001 - a configuration that cannot compile loses
        if driver.faulted(e):
            raise _Fault(index) from e
        return None
