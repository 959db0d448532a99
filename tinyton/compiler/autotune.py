"""Pick the fastest of a few configurations by measuring them on the GPU, once per key, kept on disk.

Generic on purpose (Triton's `autotune` will build on it): a `Tuner` knows nothing of what it tunes; the
caller gives the key (GPU, shape class, dtype...), the candidates and how to time one. Timing uses the
runtime driver's events around repeated launches, after a warm-up; the winner is stored in the disk
cache (`TuningCache`), so later processes on the same GPU skip the measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

from tinyton.runtime import driver
from tinyton.runtime.cache import TuningCache, default_tuning_cache

C = TypeVar("C")


def benchmark(run: Callable[[], None], *, warmup: int = 3, reps: int = 20) -> float:
    """Milliseconds per call of `run` (which launches work on the default stream), from driver events."""
    for _ in range(warmup):
        run()
    start, end = driver.Event(), driver.Event()
    start.record()
    for _ in range(reps):
        run()
    end.record()
    return start.elapsed_ms(end) / reps


@dataclass
class Tuner(Generic[C]):
    """Chooses among `candidates` per key; `encode`/`decode` turn a choice into JSON and back."""

    name: str
    encode: Callable[[C], Any] = asdict
    decode: Callable[[Any], C] | None = None
    cache: TuningCache | None = None

    def choose(self, key: Hashable, candidates: Sequence[C], measure: Callable[[C], float]) -> C:
        """The cached choice for `key`, or the candidate with the smallest `measure` (ms; a candidate
        that fails to compile or run measures as infinitely slow), stored for next time."""
        cache = self.cache or default_tuning_cache()
        full_key = (self.name, key)
        stored = cache.get(full_key)
        if stored is not None:
            choice = self.decode(stored) if self.decode is not None else stored
            if choice in candidates:
                return choice
        times = [_timed(measure, c) for c in candidates]
        best = candidates[min(range(len(candidates)), key=times.__getitem__)]
        cache.put(full_key, self.encode(best))
        return best


def _timed(measure: Callable[[C], float], candidate: C) -> float:
    try:
        return measure(candidate)
    except Exception:  # noqa: BLE001 - a configuration that cannot compile or run (resources) loses
        return math.inf
