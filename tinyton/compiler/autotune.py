"""Pick the fastest of a few configurations by measuring them on the GPU, once per key, kept on disk.

Generic: a `Tuner` knows nothing of what it tunes; the caller gives the key (GPU, shape class, dtype...),
the candidates and how to time one (`tinyton.runtime.bench.do_bench`, driver events). The winner is a
JSON record of the disk cache (`KernelCache.put_record`, hashed with the compiler's version), so later
processes on the same GPU skip the measurement, and each measurement prints what it cost. The array-program
matmul tiles, attention blocks and row-kernel shapes use it (tinyton/compiler/*_tuning.py);
`TINYTON_TUNE=0` turns all three off (`tuning_enabled`).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

from tinyton.runtime import driver
from tinyton.runtime.cache import KernelCache, cache_key, default_cache

C = TypeVar("C")


@dataclass
class Tuner(Generic[C]):
    """Chooses among `candidates` per key; `encode`/`decode` turn a choice into JSON and back."""

    name: str
    encode: Callable[[C], Any] = asdict
    decode: Callable[[Any], C] | None = None
    cache: KernelCache | None = None

    def choose(self, key: Hashable, candidates: Sequence[C], measure: Callable[[C], float]) -> C:
        """The stored choice for `key`, or the candidate with the smallest `measure` (ms; a candidate
        that fails to compile or run measures as infinitely slow), stored for next time."""
        cache = self.cache or default_cache()
        record = hashlib.sha256(cache_key(repr(key), (), "", "").encode()).hexdigest()
        stored = cache.get_record(f"tune-{self.name}", record)
        if stored is not None:
            choice = self.decode(stored) if self.decode is not None else stored
            if choice in candidates:
                return choice
        start = time.perf_counter()
        times = [_timed(measure, c) for c in candidates]
        best = candidates[min(range(len(candidates)), key=times.__getitem__)]
        cache.put_record(f"tune-{self.name}", record, self.encode(best))
        print(f"tinyton: tuned {self.name} {key} over {len(candidates)} candidates in "
              f"{time.perf_counter() - start:.1f} s: {best}", file=sys.stderr)
        return best


def tuning_enabled() -> bool:
    """Tuners measure: there is a GPU, and TINYTON_TUNE is not 0/false/off/no (the defaults without)."""
    value = os.environ.get("TINYTON_TUNE", "").strip().lower()
    return value not in ("0", "false", "off", "no") and driver.is_available()


def _timed(measure: Callable[[C], float], candidate: C) -> float:
    try:
        return measure(candidate)
    except Exception:  # noqa: BLE001 - a configuration that cannot compile or run (resources) loses
        return math.inf
