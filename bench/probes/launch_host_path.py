"""
The frontend's share of a cached launch: `kernel[grid](...)` on the fast path with the driver's launch
replaced by a no-op, so it runs without a GPU. Scalar arguments stand for device arrays (both take the
fast path; host NumPy arrays never do, they are staged).
Usage: python bench/probes/launch_host_path.py
"""

from __future__ import annotations

import timeit

import tinyton as tt

SCALE = 2.0


@tt.jit
def scaled(n, f, BLOCK: tt.constexpr):
    (tt.arange(0, BLOCK) + n) * f * SCALE  # reads the globals `tt` and `SCALE`


def main() -> None:
    launch = scaled[(1,)]
    launch(16, 1.5, BLOCK=16)  # compile the variant (runs on the simulator without a GPU)
    for plan in scaled._plans.values():
        plan.fast, plan.launch = True, lambda *args: None
    number = 200_000
    seconds = min(timeit.repeat(lambda: launch(16, 1.5, BLOCK=16), number=number, repeat=9)) / number
    print(f"kernel[grid](...) host path: {seconds * 1e9:.0f} ns per launch")


if __name__ == "__main__":
    main()
