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
its place unless a challenger is faster by MARGIN (`decide`).
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

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

    def median(self, index: int) -> float:
        return _median(self.samples[index])


@dataclass
class Tuner(Generic[C]):
    """Chooses among `candidates` per key; `encode`/`decode` turn a choice into JSON and back."""

    name: str
    encode: Callable[[C], Any] = asdict
    decode: Callable[[Any], C] | None = None
    cache: KernelCache | None = None

    def choose(self, key: Hashable, candidates: Sequence[C], prepare: Callable[[C], Timer], default: C | None = None) -> C:
        """The stored choice for `key`, or the one `measure` picks (a candidate that fails to compile or
        run loses), stored for next time."""
        cache = self.cache or default_cache()
        record = hashlib.sha256(cache_key(repr(key), (), "", "").encode()).hexdigest()
        stored = cache.get_record(f"tune-{self.name}", record)
        if stored is not None:
            choice = self.decode(stored) if self.decode is not None else stored
            if choice in candidates:
                return choice
        start = time.perf_counter()
        result = measure(candidates, prepare, default)
        best = candidates[result.choice]
        cache.put_record(f"tune-{self.name}", record, self.encode(best))
        versus = f" ({result.median(result.choice) * 1e3:.1f} µs"
        versus += f", default {result.median(candidates.index(default)) * 1e3:.1f} µs)" if default in candidates else ")"
        print(f"tinyton: tuned {self.name} {key} over {len(candidates)} candidates in "
              f"{time.perf_counter() - start:.1f} s: {best}{versus}", file=sys.stderr)
        if os.environ.get(LOG_ENV, "0") not in ("", "0"):
            for i in sorted(range(len(candidates)), key=result.median):
                timed = f"{result.median(i) * 1e3:9.1f} µs" if result.samples[i] else "   failed   "
                print(f"tinyton:   {timed}  {candidates[i]}", file=sys.stderr)
        return best


def measure(candidates: Sequence[C], prepare: Callable[[C], Timer], default: C | None = None) -> Measurement[C]:
    """Prepare every candidate, time them in interleaved rounds, re-time the finalists, decide."""
    timers = [_prepared(prepare, c) for c in candidates]
    samples: list[list[float]] = [[] for _ in candidates]
    _rounds(timers, samples, list(range(len(candidates))), ROUNDS)
    medians = [_median(s) for s in samples]
    finalists = sorted(range(len(candidates)), key=medians.__getitem__)[:2]
    incumbent = candidates.index(default) if default in candidates else None
    if incumbent is not None and incumbent not in finalists:
        finalists.append(incumbent)
    _rounds(timers, samples, finalists, FINAL_ROUNDS)
    return Measurement(candidates, samples, decide(samples, incumbent))


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
            except Exception:  # noqa: BLE001 - a configuration that cannot run (resources) loses
                timers[i] = None
                samples[i].clear()


def _prepared(prepare: Callable[[C], Timer], candidate: C) -> Timer | None:
    try:
        return prepare(candidate)
    except Exception:  # noqa: BLE001 - a configuration that cannot compile loses
        return None
