"""Pick the fastest of a few configurations by measuring them on the GPU, once per key, kept on disk.

Generic: a `Tuner` knows nothing of what it tunes; the caller gives the key (GPU, shape class, dtype...),
the candidates and how to time one (`tinyton.runtime.bench.do_bench`, driver events). The winner is a
JSON record of the disk cache (`KernelCache.put_record`, hashed with the compiler's version), so later
processes on the same GPU skip the measurement. The array-program matmul tiles use it
(tinyton/compiler/matmul_tuning.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

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
        times = [_timed(measure, c) for c in candidates]
        best = candidates[min(range(len(candidates)), key=times.__getitem__)]
        cache.put_record(f"tune-{self.name}", record, self.encode(best))
        return best


def _timed(measure: Callable[[C], float], candidate: C) -> float:
    try:
        return measure(candidate)
    except Exception:  # noqa: BLE001 - a configuration that cannot compile or run (resources) loses
        return math.inf
